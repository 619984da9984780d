package offer

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/dropstream/dropstream/internal/testenv"
)

// seeded returns a service over rdb with offers put in the catalog.
func seeded(t *testing.T, b testenv.Backend, clk *clock, n int) (*Flow, []Offer) {
	t.Helper()
	rdb := b.Client(t)
	s := newService(t, rdb, testConfig(clk))
	offers := SampleOffers(1, n, 20, s.cfg.Handlers)
	if _, err := s.Catalog().Put(context.Background(), offers...); err != nil {
		t.Fatal(err)
	}
	return s, offers
}

var testAgg = Element{OrderQuantity: 3, DeliverToLocationIDs: []string{"loc1", "loc2", "loc3"},
	PaymentMethodIDs: []string{"card", "cash"}, DeliveryMethodIDs: []string{"post", "courier"}, Aggregate: AggAverage}

func TestSearch_missHitExpiryMatchBruteForce(t *testing.T) {
	for _, b := range testenv.WithCluster() {
		t.Run(b.Name, func(t *testing.T) {
			clk := newClock()
			s, offers := seeded(t, b, clk, 600)
			runStages(t, s.rdb, s.Stages()...)
			runKeeper(t, s)
			ctx := context.Background()
			agg := testAgg
			agg.MaxPrice = ptr(int64(20000))
			req := SearchRequest{Filter: aggFilter([]string{"p1", "p2", "p3", "p4"}, agg), Limit: MaxPageSize}
			want := bruteSearch(offers, s.cfg.Handlers, []string{"p1", "p2", "p3", "p4"}, nil, &Element{
				OrderQuantity: agg.OrderQuantity, DeliverToLocationIDs: agg.DeliverToLocationIDs, PaymentMethodIDs: agg.PaymentMethodIDs,
				DeliveryMethodIDs: agg.DeliveryMethodIDs, Aggregate: agg.Aggregate, MaxPrice: agg.MaxPrice})
			if len(want) < 5 {
				t.Fatalf("fixture too small: %d brute-force matches", len(want))
			}

			first, err := s.Search(ctx, req, "")
			if err != nil || first.Outcome != OutcomeMiss || first.Status != StatusComplete {
				t.Fatalf("first search = %s/%s, %v; want miss/complete", first.Outcome, first.Status, err)
			}
			sameMatches(t, first.Matches, want)
			for i := 1; i < len(first.Matches); i++ {
				a, b := first.Matches[i-1].Prices.Average, first.Matches[i].Prices.Average
				if a > b {
					t.Fatalf("matches not ordered by average price: %v then %v", a, b)
				}
			}
			if got, err := s.applied(ctx, first.ResultID); err != nil || got != len(s.cfg.Handlers) {
				t.Errorf("result applied %d handler answers (%v), want %d", got, err, len(s.cfg.Handlers))
			}

			clk.advance(30 * time.Second)
			second, err := s.Search(ctx, req, "")
			if err != nil || second.Outcome != OutcomeHit || !reflect.DeepEqual(second.Matches, first.Matches) {
				t.Fatalf("second search = %s, %v, same matches %v; want a hit with the same matches", second.Outcome, err,
					reflect.DeepEqual(second.Matches, first.Matches))
			}
			if f := fanouts(t, s.rdb, s.cfg, first.ResultID); !allEqual(f, 1) {
				t.Errorf("fan-out messages per handler %v after a hit, want 1 each", f)
			}

			clk.advance(31 * time.Second) // past ResultTTL (1m)
			if r, err := s.Result(ctx, first.ResultID, 0, 10); err != nil || r.Status != StatusExpired {
				t.Errorf("Result after expiry = %s, %v; want expired", r.Status, err)
			}
			third, err := s.Search(ctx, req, "")
			if err != nil || third.Outcome != OutcomeMiss || third.Status != StatusComplete {
				t.Fatalf("search after expiry = %s/%s, %v; want miss/complete", third.Outcome, third.Status, err)
			}
			sameMatches(t, third.Matches, want)
			if f := fanouts(t, s.rdb, s.cfg, first.ResultID); !allEqual(f, 2) {
				t.Errorf("fan-out messages per handler %v after expiry, want 2 each", f)
			}
		})
	}
}

func TestSearch_aHitIsJudgedAtTheTimeTheCacheWasRead(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			clk := newClock()
			s, _ := seeded(t, b, clk, 60)
			runStages(t, s.rdb, s.Stages()...)
			ctx := context.Background()
			req := SearchRequest{Filter: aggFilter([]string{"p1"}, testAgg), Limit: 10}
			first, err := s.Search(ctx, req, "")
			if err != nil || first.Status != StatusComplete || first.CompletedAt == nil {
				t.Fatalf("first search = %s, %v; want complete", first.Status, err)
			}
			clk.advance(first.CompletedAt.Add(s.cfg.ResultTTL - time.Second).Sub(clk.Now()))
			// The cache is read a second before expiry; the clock passes the
			// expiry before the reply is judged.
			clk.jumpAfterNextRead("(*Flow).search", 2*time.Second)
			second, err := s.Search(ctx, req, "")
			if err != nil || second.Outcome != OutcomeHit || second.Status != StatusComplete {
				t.Fatalf("second search = %s/%s, %v; want a complete hit", second.Outcome, second.Status, err)
			}
		})
	}
}

func TestSearch_pagesAndFiltersWithoutPrices(t *testing.T) {
	clk := newClock()
	s, offers := seeded(t, testenv.Backends()[0], clk, 300)
	runStages(t, s.rdb, s.Stages()...)
	runKeeper(t, s)
	filter := Element{Type: TypeGroup, FilterType: "sellOffer", Elements: []Element{
		{Type: TypeLogical, LogicalTag: TagSeller, SellerIDs: []string{"s1", "s2", "s3", "s4", "s5", "s6"}}}}
	want := bruteSearch(offers, s.cfg.Handlers, nil, []string{"s1", "s2", "s3", "s4", "s5", "s6"}, nil)
	var got []Match
	first, err := s.Search(context.Background(), SearchRequest{Filter: filter, Limit: 7}, "")
	if err != nil || first.Total != len(want) {
		t.Fatalf("search = total %d, %v; want %d", first.Total, err, len(want))
	}
	got = append(got, first.Matches...)
	for next := first.NextOffset; next > 0; {
		page, err := s.Result(context.Background(), first.ResultID, next, 7)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, page.Matches...)
		next = page.NextOffset
	}
	sameMatches(t, got, want)
}

func TestSearch_concurrentIdenticalRequestsComputeOnce(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			clk := newClock()
			s, offers := seeded(t, b, clk, 300)
			req := SearchRequest{Filter: aggFilter([]string{"p5", "p6"}, testAgg), Limit: MaxPageSize}
			// The keeper runs from the start: while it lags past the
			// freshness bound every search would bypass the cache.
			runKeeper(t, s)
			const callers = 12
			var wg sync.WaitGroup
			resps := make([]SearchResponse, callers)
			errs := make([]error, callers)
			started := make(chan struct{}, callers)
			for i := range callers {
				wg.Go(func() {
					started <- struct{}{}
					resps[i], errs[i] = s.Search(context.Background(), req, fmt.Sprintf("call-%d", i))
				})
			}
			for range callers {
				<-started
			}
			// The handlers start once every caller is on its way: most of
			// them join the computation in progress.
			runStages(t, s.rdb, s.Stages()...)
			wg.Wait()
			outcomes := map[string]int{}
			want := bruteSearch(offers, s.cfg.Handlers, []string{"p5", "p6"}, nil, &testAgg)
			for i := range callers {
				if errs[i] != nil || resps[i].Status != StatusComplete {
					t.Fatalf("caller %d: %s, %v", i, resps[i].Status, errs[i])
				}
				sameMatches(t, resps[i].Matches, want)
				outcomes[resps[i].Outcome]++
			}
			if outcomes[OutcomeMiss] != 1 || outcomes[OutcomeJoin]+outcomes[OutcomeHit] != callers-1 {
				t.Errorf("outcomes %v, want exactly one miss and %d joins or hits", outcomes, callers-1)
			}
			if f := fanouts(t, s.rdb, s.cfg, resps[0].ResultID); !allEqual(f, 1) {
				t.Errorf("fan-out messages per handler %v, want 1 each: one computation", f)
			}
		})
	}
}

func TestSearch_repeatedRequestIDNeverStartsASecondComputation(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			clk := newClock()
			s, _ := seeded(t, b, clk, 100)
			runStages(t, s.rdb, s.Stages()...)
			runKeeper(t, s)
			ctx := context.Background()
			req := SearchRequest{RequestID: "client-req-1", Filter: aggFilter([]string{"p1"}, testAgg)}
			first, err := s.Search(ctx, req, "")
			if err != nil || first.Outcome != OutcomeMiss || first.Status != StatusComplete {
				t.Fatalf("first = %s/%s, %v", first.Outcome, first.Status, err)
			}
			clk.advance(2 * time.Minute) // the result expired
			again, err := s.Search(ctx, req, "")
			if err != nil || again.Outcome != OutcomeSeen || again.Status != StatusExpired || !reflect.DeepEqual(again.Matches, first.Matches) {
				t.Fatalf("repeated request id = %s/%s, %v; want seen/expired with the first matches", again.Outcome, again.Status, err)
			}
			if f := fanouts(t, s.rdb, s.cfg, first.ResultID); !allEqual(f, 1) {
				t.Errorf("fan-out messages %v after a repeated request id, want 1 each", f)
			}
			other, err := s.Search(ctx, SearchRequest{RequestID: "client-req-2", Filter: req.Filter}, "")
			if err != nil || other.Outcome != OutcomeMiss || other.Status != StatusComplete {
				t.Fatalf("new request id = %s/%s, %v; want a new computation", other.Outcome, other.Status, err)
			}
			if f := fanouts(t, s.rdb, s.cfg, first.ResultID); !allEqual(f, 2) {
				t.Errorf("fan-out messages %v, want 2 each", f)
			}
			// The result's keys are gone (past ResultGrace): the first
			// request id is still not computed again.
			if err := s.rdb.Del(ctx, s.cfg.resultKeys(first.ResultID).all()...).Err(); err != nil {
				t.Fatal(err)
			}
			if gone, err := s.Search(ctx, req, ""); !errors.Is(err, ErrGone) || gone.Outcome != OutcomeGone {
				t.Fatalf("repeated request id after its result is gone = %s, %v; want ErrGone", gone.Outcome, err)
			}
			if f := fanouts(t, s.rdb, s.cfg, first.ResultID); !allEqual(f, 2) {
				t.Errorf("fan-out messages %v after a gone request id, want still 2 each", f)
			}
		})
	}
}

func TestSearch_boundedWaitAnswersProcessing(t *testing.T) {
	clk := newClock()
	rdb := testenv.Backends()[0].Client(t)
	cfg := testConfig(clk)
	cfg.MaxWait = 50 * time.Millisecond
	s := newService(t, rdb, cfg)
	req := SearchRequest{Filter: aggFilter([]string{"p1"}, testAgg)}
	resp, err := s.Search(context.Background(), req, "")
	if err != nil || resp.Status != StatusProcessing || resp.Outcome != OutcomeMiss || resp.Waiting != len(s.cfg.Handlers) {
		t.Fatalf("search with no handler running = %s/%s waiting %d, %v; want miss/processing waiting %d",
			resp.Outcome, resp.Status, resp.Waiting, err, len(s.cfg.Handlers))
	}
	runStages(t, rdb, s.Stages()...)
	runKeeper(t, s)
	var r Result
	waitFor(t, func() bool {
		r, err = s.Result(context.Background(), resp.ResultID, 0, 10)
		return err == nil && r.Status == StatusComplete
	})
	if r.CompletedAt == nil || r.ExpiresAt == nil || !r.ExpiresAt.Equal(r.CompletedAt.Add(cfg.ResultTTL)) {
		t.Errorf("completed %v expires %v, want expiry = completion + %s", r.CompletedAt, r.ExpiresAt, cfg.ResultTTL)
	}
	if _, err := s.Result(context.Background(), "00000000000000000000000000000000", 0, 10); err != ErrNotFound {
		t.Errorf("unknown result: %v, want ErrNotFound", err)
	}
}
