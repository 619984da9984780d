package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/collector"
	"github.com/dropstream/dropstream/flows/avail/watch"
	"github.com/dropstream/dropstream/flows/offer"
	"github.com/dropstream/dropstream/flows/sample/sampletest"
	"github.com/dropstream/dropstream/internal/egress/egresstest"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer"
)

// The drivers of TestCluster_twoProcessesShareEveryStage, one per flow
// (comic and feed in cluster_copies_notify_test.go).

// availCopies polls the simulator from the test (the avail-collector
// service polls every source in every copy) and creates the watchers over
// the API; it checks the projection, the webhook deliveries and the
// ClickHouse counts exactly, as the single-process end-to-end test does.
type availCopies struct {
	w      *world
	hook   *webhook
	col    *collector.Collector
	proj   *writer.Projection
	topics avail.Topics
}

func (a *availCopies) name() string { return "availability" }

func (a *availCopies) setup(t *testing.T, e *copiesEnv) {
	a.topics = avail.NewTopics(copiesPartitions)
	a.w, a.hook = newWorld(t, 4), newWebhook(t)
	a.w.watchers = map[string]string{}
	for i, v := range a.w.venues {
		var got watch.Watcher
		e.call(t, i, http.MethodPost, "/v1/watchers", map[string]any{"name": "venue " + v, "provider": a.w.src.Provider, "venue": v,
			"channel": notifier.ChannelWebhook, "webhook_url": a.hook.srv.URL + "/hooks/" + v}, &got, http.StatusCreated)
		a.hook.mu.Lock()
		a.hook.secrets[got.ID] = got.Secret
		a.hook.mu.Unlock()
		a.w.watchers[v] = got.ID
	}
	tel := telemetry(t)
	var err error
	if a.proj, err = writer.NewProjection(e.rdb, writer.ProjectionConfig{Partitions: copiesPartitions}, tel); err != nil {
		t.Fatal(err)
	}
	if a.col, err = collector.NewCollector(a.topics, stream.NewPublisher(e.rdb, tel), collector.CollectorConfig{NoJitter: true, Telemetry: tel, Egress: egresstest.Loopback(t)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.col.Close() })
	if err := a.col.Upsert(a.w.src); err != nil {
		t.Fatal(err)
	}
}

// wave polls every scope. The world changes every third wave, so the
// polls after a change confirm its flips, then flip nothing: those runs'
// records go to the run topic alone, work for avail-analytics-runs.
func (a *availCopies) wave(t *testing.T, e *copiesEnv, n int) {
	if n > 0 && n%3 == 0 {
		a.w.sim.Advance(1)
	}
	if err := a.col.PollOnce(context.Background(), sourceID); err != nil {
		t.Fatalf("wave %d: poll: %v", n, err)
	}
	a.w.observe(t, context.Background(), e.rdb, a.topics)
}

func (a *availCopies) settled(*copiesEnv) string { return "" }

// lacking wants a notification and a close among the simulated changes.
func (a *availCopies) lacking(t *testing.T) string {
	if exp := a.w.expect(t, nil); len(exp.deliveries) == 0 || exp.rawCloses == 0 {
		return "no notification or no close yet (" + exp.summary() + ")"
	}
	return ""
}

func (a *availCopies) check(t *testing.T, e *copiesEnv) {
	ctx := context.Background()
	exp := a.w.expect(t, nil)
	t.Log(exp.summary())
	a.w.checkAll(t, ctx, e.rdb, a.topics, a.proj, e.ch, a.hook, exp)
	checkProjectionEntities(t, ctx, a.proj, exp, true)
	checkClickHouseSessions(t, ctx, e.ch, exp)
}

// sampleCopies publishes sample ticks (the flow has no API) and checks
// that each was counted once.
type sampleCopies struct {
	pub   *stream.Publisher
	ticks int64
}

func (s *sampleCopies) name() string { return "sample" }

func (s *sampleCopies) setup(t *testing.T, e *copiesEnv) {
	s.pub = stream.NewPublisher(e.rdb, quietTel())
}

func (s *sampleCopies) wave(t *testing.T, e *copiesEnv, n int) {
	const ticks = 40
	got, err := sampletest.Generate(context.Background(), s.pub, copiesPartitions, 10_000, 6, ticks, nil)
	if err != nil || got != ticks {
		t.Fatalf("wave %d: generate: %d, %v; want %d ticks", n, got, err, ticks)
	}
	s.ticks += got
}

func (s *sampleCopies) settled(*copiesEnv) string { return "" }

func (s *sampleCopies) lacking(*testing.T) string { return "" }

func (s *sampleCopies) check(t *testing.T, e *copiesEnv) {
	counts, err := sampletest.Counts(context.Background(), e.rdb, copiesPartitions)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, n := range counts {
		total += n
	}
	if total != s.ticks {
		t.Errorf("%d readings counted, %d ticks generated", total, s.ticks)
	}
}

// checkoutCopies checks orders out over the order/stock/payment contract:
// per wave two payable orders and one its user cannot afford, whose stock
// is given back; it checks every stock, credit and paid flag.
type checkoutCopies struct {
	calls  int
	items  []string
	stock  map[string]int64 // item → expected stock
	credit map[string]int64 // user → expected credit
	paid   map[string]bool  // order → expected paid
}

func (c *checkoutCopies) name() string { return "checkout" }

func (c *checkoutCopies) next() int { c.calls++; return c.calls }

func (c *checkoutCopies) setup(t *testing.T, e *copiesEnv) {
	c.stock, c.credit, c.paid = map[string]int64{}, map[string]int64{}, map[string]bool{}
	for range 8 {
		var item struct {
			ItemID string `json:"item_id"`
		}
		e.call(t, c.next(), http.MethodPost, "/stock/item/create/10", nil, &item, http.StatusOK)
		e.call(t, c.next(), http.MethodPost, "/stock/add/"+item.ItemID+"/100", nil, nil, http.StatusOK)
		c.items = append(c.items, item.ItemID)
		c.stock[item.ItemID] = 100
	}
}

func (c *checkoutCopies) user(t *testing.T, e *copiesEnv, credit int64) string {
	var u struct {
		UserID string `json:"user_id"`
	}
	e.call(t, c.next(), http.MethodPost, "/payment/create_user", nil, &u, http.StatusOK)
	e.call(t, c.next(), http.MethodPost, fmt.Sprintf("/payment/add_funds/%s/%d", u.UserID, credit), nil, nil, http.StatusOK)
	c.credit[u.UserID] = credit
	return u.UserID
}

// order creates an order of one of each item and checks it out.
func (c *checkoutCopies) order(t *testing.T, e *copiesEnv, user string, items ...string) {
	var o struct {
		OrderID string `json:"order_id"`
	}
	e.call(t, c.next(), http.MethodPost, "/orders/create/"+user, nil, &o, http.StatusOK)
	for _, it := range items {
		e.call(t, c.next(), http.MethodPost, "/orders/addItem/"+o.OrderID+"/"+it, nil, nil, http.StatusOK)
	}
	cost := 10 * int64(len(items))
	afford := c.credit[user] >= cost
	// A checkout still running answers 400 checkout_pending; checking out
	// again answers its final outcome.
	var status int
	var body []byte
	testenv.WaitFor(t, 60*time.Second, func() bool {
		status, body = e.call(t, c.next(), http.MethodPost, "/orders/checkout/"+o.OrderID, nil, nil, http.StatusOK, http.StatusBadRequest)
		return status == http.StatusOK || !errorCode(body, "checkout_pending")
	}, "order %s checked out", o.OrderID)
	switch {
	case afford && status != http.StatusOK:
		t.Fatalf("checkout of order %s (cost %d, credit %d) = %d %s, want 200", o.OrderID, cost, c.credit[user], status, body)
	case !afford && !errorCode(body, "checkout_failed"):
		t.Fatalf("checkout of order %s (cost %d, credit %d) = %d %s, want 400 checkout_failed", o.OrderID, cost, c.credit[user], status, body)
	}
	c.paid[o.OrderID] = afford
	if afford {
		c.credit[user] -= cost
		for _, it := range items {
			c.stock[it]--
		}
	}
}

// errorCode reports whether body is an API error of code.
func errorCode(body []byte, code string) bool {
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	return json.Unmarshal(body, &e) == nil && e.Error.Code == code
}

func (c *checkoutCopies) wave(t *testing.T, e *copiesEnv, n int) {
	it := func(k int) string { return c.items[(n+k)%len(c.items)] }
	rich, poor := c.user(t, e, 1000), c.user(t, e, 15)
	c.order(t, e, rich, it(0), it(1), it(2))
	c.order(t, e, rich, it(4), it(5))
	c.order(t, e, poor, it(6), it(7))
}

func (c *checkoutCopies) settled(*copiesEnv) string { return "" }

func (c *checkoutCopies) lacking(*testing.T) string { return "" }

func (c *checkoutCopies) check(t *testing.T, e *copiesEnv) {
	for item, want := range c.stock {
		var got struct{ Stock int64 }
		e.call(t, c.next(), http.MethodGet, "/stock/find/"+item, nil, &got, http.StatusOK)
		if got.Stock != want {
			t.Errorf("item %s: stock %d, want %d", item, got.Stock, want)
		}
	}
	for user, want := range c.credit {
		var got struct{ Credit int64 }
		e.call(t, c.next(), http.MethodGet, "/payment/find_user/"+user, nil, &got, http.StatusOK)
		if got.Credit != want {
			t.Errorf("user %s: credit %d, want %d", user, got.Credit, want)
		}
	}
	for order, want := range c.paid {
		var got struct{ Paid bool }
		e.call(t, c.next(), http.MethodGet, "/orders/find/"+order, nil, &got, http.StatusOK)
		if got.Paid != want {
			t.Errorf("order %s: paid %v, want %v", order, got.Paid, want)
		}
	}
}

// offerCopies lists offers over the API and runs new searches per wave
// (fan-out to every handler stage and fan-in), each repeated on the other
// process, which must answer it from the shared cache.
type offerCopies struct {
	calls   int
	results map[string]int // result id → total
}

func (o *offerCopies) name() string { return "offer" }

func (o *offerCopies) setup(t *testing.T, e *copiesEnv) {
	o.results = map[string]int{}
	for i, of := range offer.SampleOffers(1, 30, 5, offer.DefaultHandlers) {
		e.call(t, i, http.MethodPost, "/v1/offers", of, nil, http.StatusCreated)
	}
}

func (o *offerCopies) search(t *testing.T, e *copiesEnv, maxPrice int64) offer.SearchResponse {
	req := offer.SearchRequest{Limit: 5, Filter: offer.Element{Type: offer.TypeGroup, FilterType: "sellOffer", Elements: []offer.Element{
		{Type: offer.TypeLogical, LogicalTag: offer.TagAggregated, OrderQuantity: 1, DeliverToLocationIDs: []string{"loc1", "loc2", "loc3", "loc4"},
			PaymentMethodIDs: []string{"card", "cash", "transfer"}, DeliveryMethodIDs: []string{"post", "courier", "pickup"},
			Aggregate: offer.AggMin, MaxPrice: &maxPrice}}}}
	o.calls++
	var got offer.SearchResponse
	e.call(t, o.calls, http.MethodPost, "/v1/offers/search", req, &got, http.StatusOK, http.StatusAccepted)
	if got.Status == offer.StatusProcessing {
		testenv.WaitFor(t, copiesSettle, func() bool {
			e.call(t, o.calls, http.MethodGet, "/v1/offers/results/"+got.ResultID, nil, &got.Result, http.StatusOK)
			return got.Status != offer.StatusProcessing
		}, "result %s complete", got.ResultID)
	}
	return got
}

func (o *offerCopies) wave(t *testing.T, e *copiesEnv, n int) {
	for k := range 3 {
		maxPrice := int64(1_000_000 + 3*n + k)
		first := o.search(t, e, maxPrice)
		if first.Status != offer.StatusComplete || first.Outcome != offer.OutcomeMiss || first.Total == 0 {
			t.Fatalf("search %d = %s %s with %d matches, want a complete miss with matches", maxPrice, first.Status, first.Outcome, first.Total)
		}
		again := o.search(t, e, maxPrice)
		if again.Outcome != offer.OutcomeHit || again.ResultID != first.ResultID || again.Total != first.Total {
			t.Fatalf("search %d again on the other process = %s %s with %d matches, want a hit of %s with %d",
				maxPrice, again.ResultID, again.Outcome, again.Total, first.ResultID, first.Total)
		}
		o.results[first.ResultID] = first.Total
	}
}

func (o *offerCopies) settled(*copiesEnv) string { return "" }

func (o *offerCopies) lacking(*testing.T) string { return "" }

func (o *offerCopies) check(t *testing.T, e *copiesEnv) {
	for id, total := range o.results {
		for i := range e.apis {
			var got offer.Result
			e.call(t, i, http.MethodGet, "/v1/offers/results/"+id, nil, &got, http.StatusOK)
			if got.Status != offer.StatusComplete || got.Total != total {
				t.Errorf("result %s from %s: %s with %d matches, want complete with %d", id, e.apis[i], got.Status, got.Total, total)
			}
		}
	}
}
