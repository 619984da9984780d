package offer

import (
	"context"
	"log/slog"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/stream/streamtest"
)

const waitTimeout = 20 * time.Second

// clock is a settable test clock.
type clock struct {
	mu     sync.Mutex
	now    time.Time
	jump   time.Duration // added once, just after the next read by jumpBy
	jumpBy string        // the function whose read moves the clock
}

func newClock() *clock { return &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now
	if c.jump != 0 && calledFrom(c.jumpBy) {
		c.now, c.jump = c.now.Add(c.jump), 0
	}
	return now
}

// jumpAfterNextRead moves the clock by d just after fn's next read of it,
// as a real clock does between two reads around a slow call. Reads by
// other goroutines (stages, keepers) do not move it.
func (c *clock) jumpAfterNextRead(fn string, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.jump, c.jumpBy = d, fn
}

// calledFrom reports whether the function named fn (as runtime names it,
// e.g. "(*Flow).search") is on the caller's stack.
func calledFrom(fn string) bool {
	pc := make([]uintptr, 32)
	frames := runtime.CallersFrames(pc[:runtime.Callers(3, pc)])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, "."+fn) {
			return true
		}
		if !more {
			return false
		}
	}
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

var quiet = stream.Telemetry{Logger: slog.New(slog.DiscardHandler)}

// testConfig is a small, fast config on a test clock.
func testConfig(clk *clock) Config {
	return Config{Partitions: 4, Now: clk.Now, ResultTTL: time.Minute, ResultGrace: time.Hour, MaxWait: 10 * time.Second,
		Runner: stream.RunnerConfig{Block: 20 * time.Millisecond}}
}

func newService(t *testing.T, rdb redis.UniversalClient, cfg Config) *Flow {
	t.Helper()
	s, err := NewWith(context.Background(), rdb, cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// runStages runs one copy of each stage until the test ends.
func runStages(t *testing.T, rdb redis.UniversalClient, stages ...stream.Stage) {
	t.Helper()
	streamtest.RunStages(t, rdb, quiet, stages...)
}

// brutePrice prices q units of o for one combination, written apart from
// Kind.Price: standard takes the plan of largest minimum quantity ≤ q
// (cheapest on ties), auction the highest bid of those plans.
func brutePrice(kind Kind, o Offer, q int64, loc, del, pay string) (int64, bool) {
	if q < 1 || q > o.Quantity || !slices.Contains(o.Locations, loc) {
		return 0, false
	}
	var dc, pc int64 = -1, -1
	for _, m := range o.Delivery {
		if m.ID == del {
			dc = m.Cost
		}
	}
	for _, m := range o.Payment {
		if m.ID == pay {
			pc = m.Cost
		}
	}
	if dc < 0 || pc < 0 {
		return 0, false
	}
	var eligible []PricePlan
	for _, p := range o.Plans {
		if p.MinQuantity <= q {
			eligible = append(eligible, p)
		}
	}
	if len(eligible) == 0 {
		return 0, false
	}
	slices.SortFunc(eligible, func(a, b PricePlan) int {
		if kind == KindAuction {
			return int(b.UnitPrice - a.UnitPrice)
		}
		if a.MinQuantity != b.MinQuantity {
			return int(b.MinQuantity - a.MinQuantity)
		}
		return int(a.UnitPrice - b.UnitPrice)
	})
	return q*eligible[0].UnitPrice + dc + pc, true
}

// bruteSearch evaluates a flat filter (product/seller lists and one
// aggregatedSellOfferPrices element) over offers by brute force.
func bruteSearch(offers []Offer, handlers []HandlerSpec, products, sellers []string, agg *Element) map[string]Match {
	kinds := map[string]Kind{}
	for _, h := range handlers {
		kinds[h.Tag] = h.Kind
	}
	out := map[string]Match{}
	for _, o := range offers {
		if products != nil && !slices.Contains(products, o.ProductID) || sellers != nil && !slices.Contains(sellers, o.SellerID) {
			continue
		}
		m := Match{OfferID: o.ID, Handler: o.Handler}
		if agg != nil {
			var prices []int64
			for _, l := range agg.DeliverToLocationIDs {
				for _, d := range agg.DeliveryMethodIDs {
					for _, p := range agg.PaymentMethodIDs {
						if price, ok := brutePrice(kinds[o.Handler], o, agg.OrderQuantity, l, d, p); ok {
							prices = append(prices, price)
						}
					}
				}
			}
			if len(prices) == 0 {
				continue
			}
			var sum int64
			for _, p := range prices {
				sum += p
			}
			st := Stats{Min: slices.Min(prices), Max: slices.Max(prices), Average: float64(sum) / float64(len(prices)), Combinations: len(prices)}
			v := map[string]float64{AggMin: float64(st.Min), AggMax: float64(st.Max), AggAverage: st.Average}[agg.Aggregate]
			if agg.MinPrice != nil && v < float64(*agg.MinPrice) || agg.MaxPrice != nil && v > float64(*agg.MaxPrice) {
				continue
			}
			m.Prices = &st
		}
		out[o.ID] = m
	}
	return out
}

// sameMatches compares a result's matches with the brute-force ones.
func sameMatches(t *testing.T, got []Match, want map[string]Match) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d matches, brute force finds %d", len(got), len(want))
	}
	for _, g := range got {
		w, ok := want[g.OfferID]
		if !ok {
			t.Fatalf("match %s not found by brute force", g.OfferID)
		}
		if g.Handler != w.Handler || (g.Prices == nil) != (w.Prices == nil) {
			t.Fatalf("match %s = %+v, brute force %+v", g.OfferID, g, w)
		}
		if g.Prices != nil && (g.Prices.Min != w.Prices.Min || g.Prices.Max != w.Prices.Max ||
			g.Prices.Combinations != w.Prices.Combinations || math.Abs(g.Prices.Average-w.Prices.Average) > 1e-9) {
			t.Fatalf("match %s prices %+v, brute force %+v", g.OfferID, *g.Prices, *w.Prices)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// aggFilter is a search over products with an aggregatedSellOfferPrices
// element.
func aggFilter(products []string, agg Element) Element {
	agg.Type, agg.LogicalTag = TypeLogical, TagAggregated
	return Element{Type: TypeGroup, FilterType: "sellOffer", Elements: []Element{
		{Type: TypeLogical, LogicalTag: TagProduct, ProductIDs: products},
		{Type: TypeComplexFilter, ComplexFilter: &Element{Type: TypeGroup, FilterType: "orderPrice", Elements: []Element{agg}}},
	}}
}

// fanouts counts the fan-out messages of every handler for a result.
func fanouts(t *testing.T, rdb redis.UniversalClient, cfg Config, id string) []int64 {
	t.Helper()
	p := cfg.partition(id)
	var out []int64
	for _, h := range cfg.Handlers {
		xs, err := rdb.XRange(context.Background(), cfg.EvalTopic(h.Tag).Stream(p), "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		n := int64(0)
		for _, x := range xs {
			if x.Values["key"] == id {
				n++
			}
		}
		out = append(out, n)
	}
	return out
}

func allEqual(xs []int64, v int64) bool {
	for _, x := range xs {
		if x != v {
			return false
		}
	}
	return true
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, waitTimeout, cond)
}

// runKeeper runs the flow's freshness keeper until the test ends and
// waits until it has applied every change made so far.
func runKeeper(t *testing.T, s *Flow) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() { defer close(done); _ = s.RunFresh(ctx) }()
	waitCaughtUp(t, s)
}

// waitCaughtUp waits until the keeper has applied every change made so
// far.
func waitCaughtUp(t *testing.T, s *Flow) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		ok, err := s.CaughtUp(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("freshness keeper did not catch up")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// applied returns how many handler answers a result's generation took
// (test helper: exactly one per handler).
func (s *Flow) applied(ctx context.Context, id string) (int, error) {
	v, err := s.rdb.HGet(ctx, s.cfg.resultKeys(id).main, "applied").Result()
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(v)
}
