package offer

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/dropstream/dropstream/internal/testenv"
)

// freshConfig is a config on the real clock (the freshness bound is
// checked against the server's clock) with a short bound.
func freshConfig(bound time.Duration) Config {
	cfg := testConfig(nil)
	cfg.Now, cfg.FreshBound = nil, bound
	return cfg
}

// productSearch is a search of every offer of the products, without a
// price element.
func productSearch(products ...string) SearchRequest {
	return SearchRequest{Limit: MaxPageSize, Filter: Element{Type: TypeGroup, FilterType: "sellOffer", Elements: []Element{
		{Type: TypeLogical, LogicalTag: TagProduct, ProductIDs: products}}}}
}

// idsOf returns the sorted offer ids of matches.
func idsOf(ms []Match) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.OfferID+"@"+m.Handler)
	}
	slices.Sort(out)
	return out
}

// expected is what a product search over offers finds.
func expected(offers []Offer, product string) []string {
	var out []string
	for _, o := range offers {
		if o.ProductID == product {
			out = append(out, o.ID+"@"+o.Handler)
		}
	}
	slices.Sort(out)
	return out
}

func TestFresh_aSearchReflectsEveryChangeOlderThanTheBound(t *testing.T) {
	const bound = 150 * time.Millisecond
	changes := []struct {
		name   string
		change func(offers []Offer) (Offer, bool) // the offer written, or deleted when false
	}{
		{"create a matching offer", func(offers []Offer) (Offer, bool) {
			o := offers[0]
			o.ID, o.ProductID = "new", "p1"
			return o, true
		}},
		{"update a match out of the product", func(offers []Offer) (Offer, bool) {
			o := firstOf(offers, "p1")
			o.ProductID = "p-other"
			return o, true
		}},
		{"delete a match", func(offers []Offer) (Offer, bool) { return firstOf(offers, "p1"), false }},
		{"move a match to another handler", func(offers []Offer) (Offer, bool) {
			o := firstOf(offers, "p1")
			o.Handler = DefaultHandlers[(slices.IndexFunc(DefaultHandlers, func(h HandlerSpec) bool { return h.Tag == o.Handler })+1)%len(DefaultHandlers)].Tag
			return o, true
		}},
	}
	for _, b := range testenv.Backends() {
		for _, tc := range changes {
			t.Run(b.Name+"/"+tc.name, func(t *testing.T) {
				rdb := b.Client(t)
				s := newService(t, rdb, freshConfig(bound))
				ctx := context.Background()
				offers := SampleOffers(3, 90, 6, s.cfg.Handlers)
				if _, err := s.Catalog().Put(ctx, offers...); err != nil {
					t.Fatal(err)
				}
				runStages(t, rdb, s.Stages()...)
				runKeeper(t, s)
				req := productSearch("p1")
				before := expected(offers, "p1")
				if r, err := s.Search(ctx, req, ""); err != nil || !slices.Equal(idsOf(r.Matches), before) {
					t.Fatalf("first search = %v, %v; want %v", idsOf(r.Matches), err, before)
				}
				if r, err := s.Search(ctx, req, ""); err != nil || r.Outcome != OutcomeHit {
					t.Fatalf("second search = %s, %v; want a hit", r.Outcome, err)
				}
				o, put := tc.change(offers)
				after := slices.DeleteFunc(slices.Clone(offers), func(x Offer) bool { return x.ID == o.ID })
				if put {
					after = append(after, o)
					if _, err := s.Catalog().Put(ctx, o); err != nil {
						t.Fatal(err)
					}
				} else if err := s.Catalog().Delete(ctx, o.ID); err != nil {
					t.Fatal(err)
				}
				changed := time.Now() // the change is committed before this
				want := expected(after, "p1")
				deadline := changed.Add(waitTimeout)
				for searched := 0; ; searched++ {
					start := time.Now()
					r, err := s.Search(ctx, req, "")
					if err != nil || r.Status != StatusComplete {
						t.Fatalf("search = %s, %v", r.Status, err)
					}
					got := idsOf(r.Matches)
					late := start.Sub(changed) > bound
					switch {
					case slices.Equal(got, want) && late:
						return // fresh, and past the bound: every later search is too
					case slices.Equal(got, want):
					case late:
						t.Fatalf("search %d started %s after the change (bound %s) = %v (%s), still without it; want %v",
							searched, start.Sub(changed), bound, got, r.Outcome, want)
					case !slices.Equal(got, before):
						t.Fatalf("search %d = %v, neither before %v nor after %v", searched, got, before, want)
					}
					if time.Now().After(deadline) {
						t.Fatal("no search reflected the change")
					}
				}
			})
		}
	}
}

func firstOf(offers []Offer, product string) Offer {
	for _, o := range offers {
		if o.ProductID == product {
			return o
		}
	}
	panic("no offer of " + product)
}

func TestFresh_unrelatedChangesKeepTheCachedResult(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			rdb := b.Client(t)
			s := newService(t, rdb, freshConfig(time.Minute))
			ctx := context.Background()
			offers := SampleOffers(3, 90, 6, s.cfg.Handlers)
			if _, err := s.Catalog().Put(ctx, offers...); err != nil {
				t.Fatal(err)
			}
			runStages(t, rdb, s.Stages()...)
			runKeeper(t, s)
			req := productSearch("p1")
			if _, err := s.Search(ctx, req, ""); err != nil {
				t.Fatal(err)
			}
			other := firstOf(offers, "p2")
			other.Quantity++
			if _, err := s.Catalog().Put(ctx, other); err != nil {
				t.Fatal(err)
			}
			waitCaughtUp(t, s)
			if r, err := s.Search(ctx, req, ""); err != nil || r.Outcome != OutcomeHit {
				t.Fatalf("search after a change of another product = %s, %v; want a hit", r.Outcome, err)
			}
			mine := firstOf(offers, "p1")
			mine.Quantity++
			if _, err := s.Catalog().Put(ctx, mine); err != nil {
				t.Fatal(err)
			}
			waitCaughtUp(t, s)
			if r, err := s.Search(ctx, req, ""); err != nil || r.Outcome != OutcomeMiss {
				t.Fatalf("search after a change of a match = %s, %v; want a miss", r.Outcome, err)
			}
		})
	}
}

func TestFresh_withoutAKeeperSearchesComputeAgainPastTheBound(t *testing.T) {
	const bound = 100 * time.Millisecond
	rdb := testenv.Backends()[1].Client(t)
	s := newService(t, rdb, freshConfig(bound))
	ctx := context.Background()
	offers := SampleOffers(3, 90, 6, s.cfg.Handlers)
	if _, err := s.Catalog().Put(ctx, offers...); err != nil {
		t.Fatal(err)
	}
	runStages(t, rdb, s.Stages()...) // and no freshness keeper
	req := productSearch("p1")
	if _, err := s.Search(ctx, req, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.Catalog().Delete(ctx, firstOf(offers, "p1").ID); err != nil {
		t.Fatal(err)
	}
	changed := time.Now()
	want := expected(slices.DeleteFunc(slices.Clone(offers), func(o Offer) bool { return o.ID == firstOf(offers, "p1").ID }), "p1")
	for {
		start := time.Now()
		r, err := s.Search(ctx, req, "")
		if err != nil {
			t.Fatal(err)
		}
		if start.Sub(changed) > bound {
			if got := idsOf(r.Matches); !slices.Equal(got, want) {
				t.Fatalf("search %s after the change = %v (%s); want %v", start.Sub(changed), got, r.Outcome, want)
			}
			return
		}
	}
}

func TestFresh_aComputationInProgressIsNotJoinedAfterAChange(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			rdb := b.Client(t)
			cfg := freshConfig(time.Minute)
			cfg.MaxWait = 10 * time.Millisecond
			s := newService(t, rdb, cfg)
			ctx := context.Background()
			offers := SampleOffers(3, 90, 6, s.cfg.Handlers)
			if _, err := s.Catalog().Put(ctx, offers...); err != nil {
				t.Fatal(err)
			}
			runKeeper(t, s)
			req := productSearch("p1")
			first, err := s.Search(ctx, req, "") // no handler runs: processing
			if err != nil || first.Status != StatusProcessing {
				t.Fatalf("search = %s/%s, %v; want processing", first.Outcome, first.Status, err)
			}
			if r, err := s.Search(ctx, req, ""); err != nil || r.Outcome != OutcomeJoin {
				t.Fatalf("search before a change = %s, %v; want a join", r.Outcome, err)
			}
			if err := s.Catalog().Delete(ctx, firstOf(offers, "p1").ID); err != nil {
				t.Fatal(err)
			}
			waitCaughtUp(t, s)
			if r, err := s.Search(ctx, req, ""); err != nil || r.Outcome != OutcomeMiss {
				t.Fatalf("search after a change = %s, %v; want a miss: the computation in progress may miss it", r.Outcome, err)
			}
		})
	}
}
