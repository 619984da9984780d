package offer

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/dropstream/dropstream/internal/testenv"
)

// pricedLine finds a one-line order of o (its first location, delivery and
// payment method) that has a price, and that price.
func pricedLine(t *testing.T, s *Flow, o Offer) (OrderPriceRequest, int64) {
	t.Helper()
	kind, _ := s.cfg.kindOf(o.Handler)
	c := Combination{Location: o.Locations[0], Delivery: o.Delivery[0].ID, Payment: o.Payment[0].ID}
	for q := int64(1); q <= 20; q++ {
		if p, err := kind.Price(&o, q, c); err == nil {
			return OrderPriceRequest{Quantities: []OfferQuantity{{o.ID, q}}, Location: c.Location, Delivery: c.Delivery, Payment: c.Payment}, p
		}
	}
	t.Fatalf("offer %s has no price for 1..20 units", o.ID)
	return OrderPriceRequest{}, 0
}

// dearer returns o with every unit price raised by 7.
func dearer(o Offer) Offer {
	o.Plans = append([]PricePlan(nil), o.Plans...)
	for i := range o.Plans {
		o.Plans[i].UnitPrice += 7
	}
	return o
}

// startKeeper runs the freshness keeper until the returned stop is called
// (or the test ends), once it has applied every change so far.
func startKeeper(t *testing.T, s *Flow) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.RunFresh(ctx) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	waitCaughtUp(t, s)
	return stop
}

func TestFresh_orderPriceReflectsEveryOfferChangeOlderThanTheBound(t *testing.T) {
	const bound = 150 * time.Millisecond
	for _, b := range testenv.Backends() {
		for _, keeperRuns := range []bool{true, false} {
			name := b.Name + "/keeper stopped: the cache is bypassed"
			if keeperRuns {
				name = b.Name + "/keeper running: the record is invalidated"
			}
			t.Run(name, func(t *testing.T) {
				rdb := b.Client(t)
				s := newService(t, rdb, freshConfig(bound))
				ctx := context.Background()
				offers := SampleOffers(5, 30, 3, s.cfg.Handlers)
				if _, err := s.Catalog().Put(ctx, offers...); err != nil {
					t.Fatal(err)
				}
				stop := startKeeper(t, s)
				req, old := pricedLine(t, s, offers[0])
				for i, cached := range []bool{false, true} {
					if op, err := s.OrderPrice(ctx, req); err != nil || op.Status != PriceComplete || op.Price != old || op.Cached != cached {
						t.Fatalf("order price #%d = %+v, %v; want %d cached %v", i+1, op, err, old, cached)
					}
				}
				if !keeperRuns {
					stop()
				}
				changed := dearer(offers[0])
				if _, err := s.Catalog().Put(ctx, changed); err != nil {
					t.Fatal(err)
				}
				at := time.Now() // the change is committed before this
				kind, _ := s.cfg.kindOf(changed.Handler)
				want, err := kind.Price(&changed, req.Quantities[0].Quantity, Combination{req.Location, req.Delivery, req.Payment})
				if err != nil || want == old {
					t.Fatalf("changed price %d, %v; want a price other than %d", want, err, old)
				}
				for deadline := at.Add(waitTimeout); time.Now().Before(deadline); {
					start := time.Now()
					op, err := s.OrderPrice(ctx, req)
					if err != nil || op.Status != PriceComplete {
						t.Fatalf("order price = %+v, %v", op, err)
					}
					late := start.Sub(at) > bound
					switch {
					case op.Price == want && late:
						return
					case op.Price == want:
					case late:
						t.Fatalf("order price asked %s after the change (bound %s) = %d (cached %v), want %d", start.Sub(at), bound, op.Price, op.Cached, want)
					case op.Price != old:
						t.Fatalf("order price = %d, want %d or %d", op.Price, old, want)
					}
				}
				t.Fatalf("no order price past the bound within %s", waitTimeout)
			})
		}
	}
}

// searchHits reads the orderPrice lookups of searches served from the
// cache.
func searchHits(t *testing.T, r *sdkmetric.ManualReader) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == MetricOrderPrices {
				for _, p := range sum.DataPoints {
					if v, _ := p.Attributes.Value(keyOutcome); v.AsString() == "search_hit" {
						n += p.Value
					}
				}
			}
		}
	}
	return n
}

func TestFresh_searchPricesFromTheOrderPriceCacheUntilTheOfferChanges(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			rdb := b.Client(t)
			reader := sdkmetric.NewManualReader()
			tel := quiet
			tel.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			s, err := NewWith(context.Background(), rdb, freshConfig(time.Second), tel)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			offers := SampleOffers(6, 30, 3, s.cfg.Handlers)
			if _, err := s.Catalog().Put(ctx, offers...); err != nil {
				t.Fatal(err)
			}
			runStages(t, rdb, s.Stages()...)
			startKeeper(t, s)
			o := offers[0]
			req, price := pricedLine(t, s, o)
			// A second combination, not in the cache: computed.
			other := Combination{Location: o.Locations[0], Delivery: o.Delivery[0].ID, Payment: "never-offered"}
			search := func() Match {
				t.Helper()
				f := Element{Type: TypeGroup, FilterType: "sellOffer", Elements: []Element{{Type: TypeComplexFilter, ComplexFilter: &Element{
					Type: TypeGroup, FilterType: "orderPrice", Elements: []Element{{Type: TypeLogical, LogicalTag: TagCombinations,
						SellOfferID: o.ID, OrderQuantity: req.Quantities[0].Quantity, DeliverToLocationIDs: []string{req.Location},
						DeliveryMethodIDs: []string{req.Delivery}, PaymentMethodIDs: []string{req.Payment, other.Payment}}}}}}}
				r, err := s.Search(ctx, SearchRequest{Limit: MaxPageSize, Filter: f}, "")
				if err != nil || r.Status != StatusComplete || len(r.Matches) != 1 || r.Matches[0].Prices == nil {
					t.Fatalf("search = %+v, %v; want one priced match", r, err)
				}
				return r.Matches[0]
			}
			if op, err := s.OrderPrice(ctx, req); err != nil || op.Price != price {
				t.Fatalf("order price = %+v, %v; want %d", op, err, price)
			}
			m := search()
			if st := *m.Prices; st.Min != price || st.Max != price || st.Combinations != 1 {
				t.Errorf("search prices = %+v, want %d over one combination", st, price)
			}
			if n := searchHits(t, reader); n != 1 {
				t.Errorf("combinations priced from the cache = %d, want 1", n)
			}

			changed := dearer(o)
			if _, err := s.Catalog().Put(ctx, changed); err != nil {
				t.Fatal(err)
			}
			waitCaughtUp(t, s)
			kind, _ := s.cfg.kindOf(o.Handler)
			want, _ := kind.Price(&changed, req.Quantities[0].Quantity, Combination{req.Location, req.Delivery, req.Payment})
			m = search()
			if st := *m.Prices; st.Min != want || st.Max != want {
				t.Errorf("search after the change = %+v, want %d (not the cached %d)", st, want, price)
			}
			if n := searchHits(t, reader); n != 1 {
				t.Errorf("combinations priced from the cache after the change = %d, want still 1: the record was invalidated", n)
			}
			if op, err := s.OrderPrice(ctx, req); err != nil || op.Cached || op.Price != want {
				t.Errorf("order price after the change = %+v, %v; want %d computed again", op, err, want)
			}
		})
	}
}
