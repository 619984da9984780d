package e2e

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dropstream/dropstream/flows/checkout"
	"github.com/dropstream/dropstream/flows/offer"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"

	"github.com/dropstream/dropstream/internal/tenancy"
)

// offerFreshness runs the offer flow's freshness keeper on the cluster
// over offerSearch's catalog (a holds product "op" with b; preq is an
// order of both, priced price): a standing search of the product is
// evaluated and follows a new offer, a cached search of the product is
// invalidated by it, and a cached order price is computed again once a's
// prices rise.
func offerFreshness(t *testing.T, svc *offer.Flow, a offer.Offer, preq offer.OrderPriceRequest, price int64) {
	ctx := context.Background()
	keeperCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	t.Cleanup(func() { stop(); <-done })
	go func() { defer close(done); _ = svc.RunFresh(keeperCtx) }()
	caughtUp := func(what string) {
		t.Helper()
		testenv.WaitFor(t, clusterWait, func() bool { ok, err := svc.CaughtUp(ctx); return err == nil && ok },
			"freshness keeper caught up %s", what)
	}
	caughtUp("at start")

	product := offer.Element{Type: offer.TypeGroup, FilterType: "sellOffer", Elements: []offer.Element{
		{Type: offer.TypeLogical, LogicalTag: offer.TagProduct, ProductIDs: []string{"op"}}}}
	ss, err := svc.CreateStanding(ctx, "cluster", offer.StandingRequest{Name: "op offers", SubscriberID: "s_0123456789abcdef0123456789ab", Filter: product})
	if err != nil {
		t.Fatal(err)
	}
	standing := func(version int64, total int) {
		t.Helper()
		var cur offer.StandingSearch
		testenv.WaitFor(t, clusterWait, func() bool {
			cur, err = svc.GetStanding(ctx, tenancy.View{Tenant: "cluster"}, ss.ID)
			return err == nil && cur.Version >= version
		}, "standing search at version %d", version)
		if cur.Version != version || cur.Total != total {
			t.Fatalf("standing search at version %d with %d matches, want %d with %d", cur.Version, cur.Total, version, total)
		}
	}
	standing(1, 2)

	req := offer.SearchRequest{Limit: 10, Filter: product}
	ids := func(r offer.SearchResponse) []string {
		var out []string
		for _, m := range r.Matches {
			out = append(out, m.OfferID)
		}
		slices.Sort(out)
		return out
	}
	if _, err := svc.Search(ctx, req, ""); err != nil {
		t.Fatal(err)
	}
	if r, err := svc.Search(ctx, req, ""); err != nil || r.Outcome != offer.OutcomeHit || !slices.Equal(ids(r), []string{"op-a", "op-b"}) {
		t.Fatalf("search of product op = %s %v, %v; want a cached hit of op-a and op-b", r.Outcome, ids(r), err)
	}
	if _, err := svc.OrderPrice(ctx, preq); err != nil {
		t.Fatal(err)
	}
	if op, err := svc.OrderPrice(ctx, preq); err != nil || !op.Cached || op.Price != price {
		t.Fatalf("order price = %+v, %v; want %d from the cache", op, err, price)
	}

	// A new offer of the product: the standing search follows it, and
	// the cached search no longer serves the result without it.
	c := a
	c.ID = "op-c"
	if _, err := svc.Catalog().Put(ctx, c); err != nil {
		t.Fatal(err)
	}
	caughtUp("after op-c was added")
	standing(2, 3)
	if r, err := svc.Search(ctx, req, ""); err != nil || r.Outcome != offer.OutcomeMiss || !slices.Equal(ids(r), []string{"op-a", "op-b", "op-c"}) {
		t.Errorf("search after op-c was added = %s %v, %v; want a miss with op-a, op-b and op-c", r.Outcome, ids(r), err)
	}

	// op-a's unit prices rise by 7: the cached order price is computed
	// again.
	dearer := a
	dearer.Plans = slices.Clone(a.Plans)
	for i := range dearer.Plans {
		dearer.Plans[i].UnitPrice += 7
	}
	if _, err := svc.Catalog().Put(ctx, dearer); err != nil {
		t.Fatal(err)
	}
	caughtUp("after op-a's prices rose")
	want := price + 6*7 // six units of op-a in the order
	if op, err := svc.OrderPrice(ctx, preq); err != nil || op.Status != offer.PriceComplete || op.Cached || op.Price != want {
		t.Errorf("order price after op-a's prices rose = %+v, %v; want %d computed again", op, err, want)
	}
}

// checkoutCancel cancels, as an operator, a checkout attempt stuck on its
// payment (no payment stage runs) on the cluster: the attempt fails, the
// stock it took comes back and no credit is taken, and a second cancel
// answers the same without giving anything back twice.
func checkoutCancel(t *testing.T, nodes string) {
	ctx := context.Background()
	rdb := dial(t, nodes)
	pub := stream.NewPublisher(rdb, quietTel())
	svc, err := checkout.NewWith(rdb, pub, checkout.Config{Partitions: 8, Timeout: time.Minute, Stage: clusterRunner()}, quietTel())
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() { stop(); wg.Wait() })
	wg.Go(func() { _ = svc.Run(runCtx) })
	var stages []stream.Stage
	for _, s := range svc.Stages() {
		if s.Name != checkout.StagePayment {
			stages = append(stages, s)
		}
	}
	runStages(t, rdb, stages...)
	select {
	case <-svc.Ready():
	case <-time.After(clusterWait):
		t.Fatal("checkout waiter not ready")
	}
	st := svc.Store()
	item, err := st.CreateItemOf(ctx, tenancy.Open, 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddStock(ctx, item, 5); err != nil {
		t.Fatal(err)
	}
	user := mustUser(t, st, 100)
	order, err := st.CreateOrder(ctx, user)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddItem(ctx, order, item, 2); err != nil {
		t.Fatal(err)
	}
	expect := func(what string, stock, credit int64) {
		t.Helper()
		s, _, err := st.FindItem(ctx, item)
		c, err2 := st.FindUser(ctx, user)
		if err != nil || err2 != nil || s != stock || c != credit {
			t.Fatalf("%s: stock %d, credit %d (%v, %v); want %d and %d", what, s, c, err, err2, stock, credit)
		}
	}

	// The caller goes away once the stock is taken; the attempt waits for
	// a payment that never comes.
	callCtx, leave := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := svc.Checkout(callCtx, order)
		errc <- err
	}()
	testenv.WaitFor(t, clusterWait, func() bool { s, _, err := st.FindItem(ctx, item); return err == nil && s == 3 }, "the stuck attempt took the stock")
	leave()
	if err := <-errc; !errors.Is(err, checkout.ErrPending) {
		t.Fatalf("checkout left by its caller = %v, want ErrPending", err)
	}
	expect("stuck attempt", 3, 100)

	c, err := svc.Cancel(ctx, order, "cluster-operator")
	if err != nil || c.OrderID != order || c.TrNum != 1 || c.Status != checkout.StatusFailed || c.Reason != "cancelled by an operator" ||
		c.RequestedBy != "cluster-operator" || c.RequestedAt.IsZero() {
		t.Fatalf("cancel = %+v, %v; want attempt 1 failed, cancelled by cluster-operator", c, err)
	}
	expect("after the cancel", 5, 100)
	if again, err := svc.Cancel(ctx, order, "someone-else"); err != nil || again != c {
		t.Errorf("repeated cancel = %+v, %v; want %+v", again, err, c)
	}
	expect("after a second cancel", 5, 100)
	if o, err := st.FindOrder(ctx, order); err != nil || o.Paid {
		t.Errorf("cancelled order = %+v, %v; want it unpaid", o, err)
	}
}
