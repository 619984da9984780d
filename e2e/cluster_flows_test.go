package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/flows/checkout"
	"github.com/dropstream/dropstream/flows/comic"
	"github.com/dropstream/dropstream/flows/offer"
	"github.com/dropstream/dropstream/internal/egress/egresstest"
	"github.com/dropstream/dropstream/internal/tenancy"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/stream"
)

// Cluster scenarios of the domain flows (see clusterScenarios): each drives
// a flow through its exported API on the cluster client, with keys of
// several partitions, and checks what a user would check.

const clusterWait = 30 * time.Second

// quietTel is the telemetry of the flows in cluster scenarios.
func quietTel() stream.Telemetry {
	return stream.Telemetry{Logger: slog.New(slog.DiscardHandler)}
}

// clusterRunner makes redelivery quick in the scenarios.
func clusterRunner() stream.RunnerConfig {
	return stream.RunnerConfig{Block: 50 * time.Millisecond, ClaimInterval: 200 * time.Millisecond, ClaimIdle: 20 * time.Second,
		HandlerTimeout: 5 * time.Second, Retry: stream.RetryConfig{MaxInterval: 200 * time.Millisecond}, ErrorBackoff: 100 * time.Millisecond,
		MaxDeliveries: 50}
}

// runStages runs the stages (with clusterRunner unless they set a
// consumer) until the test ends.
func runStages(t *testing.T, rdb redis.UniversalClient, stages ...stream.Stage) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for _, s := range stages {
		if s.Config.Consumer == "" {
			s.Config = clusterRunner()
		}
		r, err := stream.NewRunner(rdb, s, quietTel())
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { _ = r.Run(ctx) })
	}
}

// checkoutSaga checks out orders whose items span every partition on the
// cluster: a paid one (stock and credit taken once) and one that fails on
// payment and is compensated (stock given back).
func checkoutSaga(t *testing.T, nodes string) {
	const partitions, items = 8, 16
	ctx := context.Background()
	rdb := dial(t, nodes)
	pub := stream.NewPublisher(rdb, quietTel())
	svc, err := checkout.NewWith(rdb, pub, checkout.Config{Partitions: partitions, Timeout: time.Minute, Stage: clusterRunner()}, quietTel())
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() { stop(); wg.Wait() })
	wg.Go(func() { _ = svc.Run(runCtx) })
	runStages(t, rdb, svc.Stages()...)
	select {
	case <-svc.Ready():
	case <-time.After(clusterWait):
		t.Fatal("checkout waiter not ready")
	}
	st := svc.Store()
	var ids []string
	parts := map[int]bool{}
	for range items {
		id, err := st.CreateItemOf(ctx, tenancy.Open, 10)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := st.AddStock(ctx, id, 5); err != nil || n != 5 {
			t.Fatalf("AddStock = %d, %v; want 5", n, err)
		}
		ids = append(ids, id)
		parts[st.Keys().Partition(id)] = true
	}
	if len(parts) < 3 {
		t.Fatalf("items in %d partitions, want several", len(parts))
	}
	rich, poor := mustUser(t, st, 1000), mustUser(t, st, 15)

	paid := mustOrder(t, st, rich, ids)
	if r, err := svc.Checkout(ctx, paid); err != nil || r.Status != checkout.StatusSucceeded {
		t.Fatalf("checkout of the paid order = %+v, %v; want succeeded", r, err)
	}
	failed := mustOrder(t, st, poor, ids[:4])
	if r, err := svc.Checkout(ctx, failed); !errors.Is(err, checkout.ErrCheckoutFailed) {
		t.Fatalf("checkout of the unaffordable order = %+v, %v; want ErrCheckoutFailed", r, err)
	}
	for _, id := range ids {
		if stock, _, err := st.FindItem(ctx, id); err != nil || stock != 4 {
			t.Errorf("item %s: stock %d, %v; want 4 (one sold, the failed order's given back)", id, stock, err)
		}
	}
	for user, want := range map[string]int64{rich: 1000 - 10*items, poor: 15} {
		if credit, err := st.FindUser(ctx, user); err != nil || credit != want {
			t.Errorf("user %s: credit %d, %v; want %d", user, credit, err, want)
		}
	}
	if o, err := st.FindOrder(ctx, paid); err != nil || !o.Paid {
		t.Errorf("paid order = %+v, %v; want paid", o, err)
	}
	// Checking the paid order out again charges nothing.
	if r, err := svc.Checkout(ctx, paid); err != nil || !r.AlreadyPaid {
		t.Errorf("second checkout = %+v, %v; want already paid", r, err)
	}
	if credit, _ := st.FindUser(ctx, rich); credit != 1000-10*items {
		t.Errorf("credit after the second checkout %d, want %d", credit, 1000-10*items)
	}
}

func mustUser(t *testing.T, st *checkout.Store, credit int64) string {
	t.Helper()
	ctx := context.Background()
	id, err := st.CreateUserOf(ctx, tenancy.Open)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddFunds(ctx, id, credit); err != nil {
		t.Fatal(err)
	}
	return id
}

func mustOrder(t *testing.T, st *checkout.Store, user string, items []string) string {
	t.Helper()
	ctx := context.Background()
	id, err := st.CreateOrder(ctx, user)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if _, err := st.AddItem(ctx, id, it, 1); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

// comicFlow lists comics of several partitions on the cluster: each
// matching subscriber is notified once (a busy receiver makes the first
// sends retry), a deleted subscription is not, a sale sells once and the
// loser, refunded, is forgotten so the comic's return notifies them again.
func comicFlow(t *testing.T, nodes string) {
	const comics = 6
	ctx := context.Background()
	rdb := dial(t, nodes)
	rcv := &comicReceiver{fail: 3}
	srv := httptest.NewServer(rcv)
	t.Cleanup(srv.Close)
	pay := &comicPayments{charged: map[string]int64{}, refunded: map[string]int64{}}
	svc, err := comic.NewWith(rdb, comic.Config{Partitions: 8, Webhook: notifier.WebhookConfig{Egress: egresstest.Allow(t, srv.URL)},
		Delivery: comic.DeliveryConfig{NotifyURL: srv.URL + "/notify",
			NotifySecret: "0123456789abcdef0123456789abcdef"}}, pay, quietTel())
	if err != nil {
		t.Fatal(err)
	}
	subscribe := func(email, body string) comic.Subscription {
		s, err := svc.Subscriptions.Create(ctx, email, json.RawMessage(body), "")
		if err != nil {
			t.Fatalf("subscribe %s: %v", email, err)
		}
		return s
	}
	subscribe("late@example.com", `{"series":"Watchmen"}`)
	subscribe("fast@example.com", `{"publisher":"DC"}`)
	gone := subscribe("gone@example.com", `{"publisher":"DC","key_issue":true}`)
	if err := svc.Subscriptions.DeleteIn(ctx, tenancy.View{All: true}, gone.ID); err != nil {
		t.Fatal(err)
	}
	runStages(t, rdb, svc.Stages()...)
	var listed []comic.Comic
	parts := map[int]bool{}
	for i := range comics {
		c := comic.Comic{Grade: 9.8, Issue: fmt.Sprint(i + 1), KeyIssue: true, PriceCents: 1000 + int64(i), Printing: 1,
			Publisher: "DC", Series: "Watchmen", Title: fmt.Sprint("Chapter ", i+1), Year: 1986}
		if _, created, err := svc.Inventory.Add(ctx, c); err != nil || !created {
			t.Fatalf("list comic %d: created %v, %v", i, created, err)
		}
		listed = append(listed, c)
		parts[svc.Topics().Jobs.Partition(c.ID())] = true
	}
	if len(parts) < 3 {
		t.Fatalf("comics in %d partitions, want several", len(parts))
	}
	want := map[[2]string]int{}
	for _, c := range listed {
		want[[2]string{c.ID(), "late@example.com"}] = 1
		want[[2]string{c.ID(), "fast@example.com"}] = 1
	}
	testenv.WaitFor(t, clusterWait, func() bool { return rcv.count() >= len(want) }, "every comic notified")
	if got := rcv.received(); !mapsEqual(got, want) {
		t.Fatalf("received %v, want each of %d comics once to late and fast", got, comics)
	}
	// late is charged, but fast buys the comic meanwhile: both hold it, by
	// the tokens of their notifications.
	c := listed[0]
	pay.onCharge = func(txn string) {
		if txn == "txn-late" {
			if _, err := svc.Sales.Purchase(ctx, "fast@example.com", c.ID(), "card", "txn-fast", rcv.token(c.ID(), "fast@example.com")); err != nil {
				t.Errorf("fast purchase: %v", err)
			}
		}
	}
	if _, err := svc.Sales.Purchase(ctx, "late@example.com", c.ID(), "card", "txn-late", rcv.token(c.ID(), "late@example.com")); !errors.Is(err, comic.ErrSoldOut) {
		t.Fatalf("late purchase = %v, want ErrSoldOut", err)
	}
	if pay.refund("txn-late") != c.PriceCents || pay.refund("txn-fast") != 0 {
		t.Errorf("refunds %v: want late refunded the price, fast not", pay.refunded)
	}
	// A buyer of the sold comic is charged nothing; a declined charge
	// sells nothing.
	if _, err := svc.Sales.Purchase(ctx, "other@example.com", c.ID(), "card", "txn-other", ""); !errors.Is(err, comic.ErrSoldOut) {
		t.Errorf("purchase of a sold comic = %v, want ErrSoldOut", err)
	}
	if _, err := svc.Sales.Purchase(ctx, "fast@example.com", listed[1].ID(), "bad", "txn-bad", rcv.token(listed[1].ID(), "fast@example.com")); !errors.Is(err, comic.ErrPayment) {
		t.Errorf("purchase with a declined payment = %v, want ErrPayment", err)
	}
	if _, err := svc.Inventory.Get(ctx, listed[1].ID()); err != nil {
		t.Errorf("comic of the declined purchase: %v, want it still listed", err)
	}
	if pay.charge("txn-other") != 0 || pay.charge("txn-bad") != 0 {
		t.Errorf("charges %v: want nothing charged for other and bad", pay.charged)
	}
	sales, err := svc.Sales.Sales(ctx, c.ID())
	if err != nil || len(sales) != 1 || sales[0].Email != "fast@example.com" {
		t.Errorf("sales %+v, %v; want fast's only", sales, err)
	}
	hist, err := svc.Delivery.History(ctx, c.ID())
	if _, ok := hist["late@example.com"]; err != nil || ok {
		t.Errorf("history %v, %v: want late forgotten after the refund", hist, err)
	}
	// The comic comes back: late is notified again, fast is not.
	if _, _, err := svc.Inventory.Add(ctx, c); err != nil {
		t.Fatal(err)
	}
	want[[2]string{c.ID(), "late@example.com"}] = 2
	testenv.WaitFor(t, clusterWait, func() bool { return rcv.count() >= len(want)+1 }, "the returned comic notified")
	if got := rcv.received(); !mapsEqual(got, want) {
		t.Errorf("received %v, want %v", got, want)
	}
	comicRefunds(t, rdb)
}

// comicRefunds refunds purchases through the checkout adapter
// (comic.CheckoutPayments) to users of several partitions, each refund asked for
// twice: each user is credited once.
func comicRefunds(t *testing.T, rdb redis.UniversalClient) {
	ctx := context.Background()
	co, err := checkout.NewWith(rdb, stream.NewPublisher(rdb, quietTel()), checkout.Config{Partitions: 8}, quietTel())
	if err != nil {
		t.Fatal(err)
	}
	pay := comic.NewCheckoutPayments(rdb, co)
	parts := map[int]bool{}
	for i := range 6 {
		user, err := co.Store().CreateUserOf(ctx, tenancy.Open)
		if err != nil {
			t.Fatal(err)
		}
		parts[co.Store().Keys().Partition(user)] = true
		txn := fmt.Sprint("txn-refund-", i)
		for range 2 {
			if err := pay.Refund(ctx, txn, user, 500); err != nil {
				t.Fatalf("refund %s: %v", txn, err)
			}
		}
		if credit, err := co.Store().FindUser(ctx, user); err != nil || credit != 500 {
			t.Errorf("user %s credit %d, %v after a refund asked for twice; want 500", user, credit, err)
		}
	}
	if len(parts) < 2 {
		t.Errorf("users in %d partitions, want several", len(parts))
	}
}

// comicReceiver is a POST /notify endpoint answering 503 to its first
// fail requests.
type comicReceiver struct {
	mu   sync.Mutex
	fail int
	got  []comic.NotifyBody
}

func (r *comicReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail > 0 {
		r.fail--
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	var n comic.NotifyBody
	if err := json.Unmarshal(body, &n); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.got = append(r.got, n)
}

func (r *comicReceiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

// token is the hold token of the last notification of comic id to email.
func (r *comicReceiver) token(id, email string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	tok := ""
	for _, n := range r.got {
		if n.ComicID == id && n.Email == email {
			tok = n.HoldToken
		}
	}
	return tok
}

// received returns (comic id, email) → deliveries.
func (r *comicReceiver) received() map[[2]string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[[2]string]int{}
	for _, n := range r.got {
		out[[2]string{n.ComicID, n.Email}]++
	}
	return out
}

type comicPayments struct {
	mu                sync.Mutex
	charged, refunded map[string]int64
	onCharge          func(txn string) // runs at the start of every charge
}

func (p *comicPayments) Charge(_ context.Context, txn, payment string, cents int64) error {
	if payment == "bad" {
		return comic.ErrDeclined
	}
	if p.onCharge != nil {
		p.onCharge(txn)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.charged[txn] = cents
	return nil
}

func (p *comicPayments) Refund(_ context.Context, txn, _ string, cents int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refunded[txn] = cents
	return nil
}

func (p *comicPayments) charge(txn string) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.charged[txn]
}

func (p *comicPayments) refund(txn string) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refunded[txn]
}

func mapsEqual[K comparable](a, b map[K]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// offerSearch seeds offers, deletes one, and runs a search (fan-out to the
// handler stages, fan-in), its cached repeat, a page of its result and an
// order price, on the cluster; then the freshness keeper (offerFreshness).
func offerSearch(t *testing.T, nodes string) {
	ctx := context.Background()
	rdb := dial(t, nodes)
	cfg := offer.Config{Partitions: 8, MaxWait: 20 * time.Second, Runner: clusterRunner()}
	svc, err := offer.NewWith(ctx, rdb, cfg, quietTel())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	offers := offer.SampleOffers(1, 400, 20, svc.Config().Handlers)
	if _, err := svc.Catalog().Put(ctx, offers...); err != nil {
		t.Fatal(err)
	}
	a := offer.Offer{ID: "op-a", Handler: "standard", ProductID: "op", SellerID: "s", Quantity: 10, Locations: []string{"l"},
		Plans: []offer.PricePlan{{ID: "x", MinQuantity: 1, UnitPrice: 500}, {ID: "y", MinQuantity: 5, UnitPrice: 400}}, Delivery: []offer.Method{{ID: "post", Cost: 50}}, Payment: []offer.Method{{ID: "card", Cost: 7}}}
	b := offer.Offer{ID: "op-b", Handler: "auction", ProductID: "op", SellerID: "s", Quantity: 3, Locations: []string{"l"},
		Plans: []offer.PricePlan{{ID: "x", MinQuantity: 1, UnitPrice: 900}, {ID: "y", MinQuantity: 2, UnitPrice: 1000}}, Delivery: []offer.Method{{ID: "post", Cost: 20}}, Payment: []offer.Method{{ID: "card", Cost: 1}}}
	if _, err := svc.Catalog().Put(ctx, a, b); err != nil {
		t.Fatal(err)
	}
	if err := svc.Catalog().Delete(ctx, offers[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Catalog().Get(ctx, offers[0].ID); !errors.Is(err, offer.ErrNotFound) {
		t.Fatalf("deleted offer: %v, want ErrNotFound", err)
	}
	if err := svc.Warm(ctx); err != nil {
		t.Fatal(err)
	}
	runStages(t, rdb, svc.Stages()...)

	req := offer.SearchRequest{Limit: 5, Filter: offer.Element{Type: offer.TypeGroup, FilterType: "sellOffer", Elements: []offer.Element{
		{Type: offer.TypeLogical, LogicalTag: offer.TagAggregated, OrderQuantity: 1, DeliverToLocationIDs: []string{"loc1", "loc2", "loc3", "loc4"},
			PaymentMethodIDs: []string{"card", "cash", "transfer"}, DeliveryMethodIDs: []string{"post", "courier", "pickup"}, Aggregate: offer.AggMin}}}}
	first, err := svc.Search(ctx, req, "")
	if err != nil || first.Status != offer.StatusComplete || first.Outcome != offer.OutcomeMiss || first.Total == 0 {
		t.Fatalf("first search = %+v, %v; want a complete miss with matches", first, err)
	}
	again, err := svc.Search(ctx, req, "")
	if err != nil || again.Outcome != offer.OutcomeHit || again.Total != first.Total {
		t.Fatalf("second search = %+v, %v; want a hit with the same %d matches", again, err, first.Total)
	}
	page, err := svc.Result(ctx, first.ResultID, 5, 5)
	if err != nil || page.Total != first.Total || len(page.Matches) != min(5, max(first.Total-5, 0)) {
		t.Fatalf("second page = %d matches of %d, %v; want the next of %d", len(page.Matches), page.Total, err, first.Total)
	}
	for _, m := range append(first.Matches, page.Matches...) {
		if m.OfferID == offers[0].ID {
			t.Errorf("the deleted offer %s matched", m.OfferID)
		}
	}
	preq := offer.OrderPriceRequest{Quantities: []offer.OfferQuantity{{OfferID: "op-b", Quantity: 2}, {OfferID: "op-a", Quantity: 6}}, Location: "l", Delivery: "post", Payment: "card"}
	wantPrice := int64(6*400+57) + int64(2*1000+21)
	for i, wantCached := range []bool{false, true} {
		op, err := svc.OrderPrice(ctx, preq)
		if err != nil || op.Status != offer.PriceComplete || op.Price != wantPrice || op.Cached != wantCached {
			t.Fatalf("order price #%d = %+v, %v; want complete %d cached %v", i+1, op, err, wantPrice, wantCached)
		}
	}
	offerFreshness(t, svc, a, preq, wantPrice)
}
