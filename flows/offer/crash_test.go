package offer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dropstream/dropstream/internal/testenv"

	"github.com/dropstream/dropstream/stream"
)

// A handler copy dies in the middle of a batch: it answered some fan-out
// messages (not yet acknowledged) and hangs on the next. The other copy of
// the same stage claims every pending message, answers them again, and
// every result completes with exactly the brute-force matches, each
// handler's answer applied once.
func TestHandler_copyDiesMidBatchAnotherCopyCompletes(t *testing.T) {
	for _, b := range testenv.WithCluster() {
		t.Run(b.Name, func(t *testing.T) {
			clk := newClock()
			rdb := b.Client(t)
			cfg := testConfig(clk)
			cfg.Partitions = 1 // every fan-out message in one stream: one batch
			cfg.Runner = stream.RunnerConfig{Block: 20 * time.Millisecond, BatchSize: 100, HandlerTimeout: time.Second,
				ClaimIdle: 1500 * time.Millisecond, ClaimInterval: 100 * time.Millisecond, Retry: stream.RetryConfig{Disabled: true}}
			s := newService(t, rdb, cfg)
			offers := SampleOffers(7, 300, 20, s.cfg.Handlers)
			if _, err := s.Catalog().Put(context.Background(), offers...); err != nil {
				t.Fatal(err)
			}
			stages := s.Stages()
			victim := stages[0] // the first handler's stage

			// Searches published while no handler runs, so the victim
			// reads them all in one batch.
			const searches = 6
			ids := make([]string, searches)
			filters := make([]SearchRequest, searches)
			quick := *s
			quick.cfg.MaxWait = time.Millisecond
			for i := range searches {
				filters[i] = SearchRequest{Filter: aggFilter([]string{fmt.Sprintf("p%d", i)}, testAgg), Limit: MaxPageSize}
				resp, err := quick.Search(context.Background(), filters[i], "")
				if err != nil || resp.Outcome != OutcomeMiss {
					t.Fatalf("search %d: %s, %v", i, resp.Outcome, err)
				}
				ids[i] = resp.ResultID
			}

			// The dying copy answers two messages, then hangs on the third
			// until the test ends, never acknowledging anything.
			var handled atomic.Int32
			hung := make(chan struct{})
			release := make(chan struct{})
			dying := victim
			dying.Config.Consumer = "dying"
			inner := victim.Handler
			dying.Handler = func(ctx context.Context, m *stream.Message) error {
				if handled.Add(1) == 3 {
					close(hung)
					<-release
					return errors.New("crashed")
				}
				return inner(ctx, m)
			}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			t.Cleanup(func() { close(release); cancel(); wg.Wait() })
			r, err := stream.NewRunner(rdb, dying, quiet)
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() { _ = r.Run(ctx) })
			select {
			case <-hung:
			case <-time.After(waitTimeout):
				t.Fatal("the dying copy never reached its third message")
			}
			pending, err := rdb.XPending(context.Background(), victim.Topic.Stream(0), victim.Name).Result()
			if err != nil || pending.Count != searches {
				t.Fatalf("pending %+v, %v; want all %d messages pending on the dying copy", pending, err, searches)
			}

			// The survivors: a second copy of the victim's stage and the
			// other handlers.
			survivor := victim
			survivor.Config.Consumer = "survivor"
			runStages(t, rdb, append([]stream.Stage{survivor}, stages[1:]...)...)
			for i, id := range ids {
				var res Result
				waitFor(t, func() bool {
					res, err = s.Result(context.Background(), id, 0, MaxPageSize)
					return err == nil && res.Status == StatusComplete
				})
				sameMatches(t, res.Matches, bruteSearch(offers, s.cfg.Handlers, []string{fmt.Sprintf("p%d", i)}, nil, &testAgg))
				if n, err := s.applied(context.Background(), id); err != nil || n != len(s.cfg.Handlers) {
					t.Errorf("result %d took %d handler answers (%v), want exactly %d", i, n, err, len(s.cfg.Handlers))
				}
			}
			waitFor(t, func() bool {
				p, err := rdb.XPending(context.Background(), victim.Topic.Stream(0), victim.Name).Result()
				return err == nil && p.Count == 0
			})
		})
	}
}

func TestHandler_repeatedAndStaleMessagesChangeNothing(t *testing.T) {
	clk := newClock()
	rdb := testenv.Backends()[0].Client(t)
	cfg := testConfig(clk)
	cfg.MaxWait = time.Millisecond
	s := newService(t, rdb, cfg)
	offers := SampleOffers(3, 200, 20, s.cfg.Handlers)
	if _, err := s.Catalog().Put(context.Background(), offers...); err != nil {
		t.Fatal(err)
	}
	req := SearchRequest{Filter: aggFilter([]string{"p1", "p2"}, testAgg), Limit: MaxPageSize}
	resp, err := s.Search(context.Background(), req, "")
	if err != nil || resp.Status != StatusProcessing {
		t.Fatalf("search = %s, %v", resp.Status, err)
	}
	p := s.cfg.partition(resp.ResultID)
	stale := &stream.Message{Key: resp.ResultID, Payload: []byte(`{"resultId":"` + resp.ResultID +
		`","uniqueRequestId":"an-older-generation","filter":{"type":"group","filterType":"sellOffer","elements":[{"type":"logical","logicalTag":"product","productIds":["p1"]}]}}`)}
	for _, st := range s.Stages() {
		xs, err := rdb.XRange(context.Background(), st.Topic.Stream(p), "-", "+").Result()
		if err != nil || len(xs) != 1 {
			t.Fatalf("%s: %d fan-out messages, %v", st.Name, len(xs), err)
		}
		payload, _ := xs[0].Values["payload"].(string)
		m := &stream.Message{ID: xs[0].ID, Key: resp.ResultID, Payload: []byte(payload), Attempt: 1}
		for range 3 { // delivered three times
			if err := st.Handler(context.Background(), m); err != nil {
				t.Fatalf("%s: %v", st.Name, err)
			}
		}
		if err := st.Handler(context.Background(), stale); err != nil {
			t.Fatalf("%s stale message: %v", st.Name, err)
		}
		if st.Name == StageHandler(s.cfg.Handlers[0].Tag) {
			// Partial data of a result still processing expires with it.
			keys := s.cfg.resultKeys(resp.ResultID)
			ttl, err := rdb.PTTL(context.Background(), keys.data).Result()
			if n, _ := rdb.ZCard(context.Background(), keys.data).Result(); err != nil || n == 0 || ttl <= 0 {
				t.Errorf("after the first answer: %d partial matches with TTL %s (%v); want some, expiring", n, ttl, err)
			}
		}
	}
	r, err := s.Result(context.Background(), resp.ResultID, 0, MaxPageSize)
	if err != nil || r.Status != StatusComplete {
		t.Fatalf("result = %s, %v", r.Status, err)
	}
	sameMatches(t, r.Matches, bruteSearch(offers, s.cfg.Handlers, []string{"p1", "p2"}, nil, &testAgg))
	if n, err := s.applied(context.Background(), resp.ResultID); err != nil || n != len(s.cfg.Handlers) {
		t.Errorf("applied %d (%v), want %d", n, err, len(s.cfg.Handlers))
	}
	for _, bad := range []string{`not json`, `{"resultId":"x","uniqueRequestId":"u","filter":{}}`,
		`{"resultId":"` + resp.ResultID + `","uniqueRequestId":"u","filter":{"type":"group"}}`} {
		err := s.Stages()[0].Handler(context.Background(), &stream.Message{Payload: []byte(bad)})
		if !stream.IsPermanent(err) {
			t.Errorf("handler(%s) = %v, want a permanent error", bad, err)
		}
	}
}
