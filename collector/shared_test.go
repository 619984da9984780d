package collector_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/collector"
	"github.com/dropstream/dropstream/collector/provider"
	"github.com/dropstream/dropstream/collector/simulator"
	"github.com/dropstream/dropstream/collector/simulator/simtest"
	"github.com/dropstream/dropstream/internal/egress/egresstest"
	"github.com/dropstream/dropstream/internal/tenancy"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// sharedBackends are the Redis servers the shared collector tests run on:
// the gates need a Redis whose keys expire on the wall clock.
func sharedBackends() []testenv.Backend {
	return []testenv.Backend{
		{Name: "redis-server", Client: func(t testing.TB) redis.UniversalClient { return testenv.Dial(t, testenv.RedisURL(t)) }},
		{Name: "redis-cluster", Client: func(t testing.TB) redis.UniversalClient { return testenv.Dial(t, testenv.RedisClusterURL(t)) }},
	}
}

// copies is a simulator and n collectors sharing one Redis.
type copies struct {
	rdb    redis.UniversalClient
	sim    *simtest.Sim
	topics avail.Topics
	src    collector.Source
	cs     []*collector.Collector
	agents []string
}

// newCopies starts a simulator of venues×2 scopes and n collectors sharing
// rdb (CollectorConfig.Shared), each with its own user agent, all with the
// simulator's source.
func newCopies(t *testing.T, rdb redis.UniversalClient, venues, n int, cfg collector.CollectorConfig) *copies {
	t.Helper()
	sim, err := simtest.New(simulator.Config{Seed: 7, Venues: venues, Dates: []string{"2031-05-16"}, PartySizes: []int{2, 4}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	k := &copies{rdb: rdb, sim: sim, topics: avail.NewTopics(4)}
	k.src = collector.Source{ID: "shared-" + randomSuffix(), Provider: provider.Simulator, BaseURL: srv.URL, Interval: time.Second,
		RateLimit: collector.MaxRateLimit}
	for _, v := range sim.Venues() {
		for _, party := range []int{2, 4} {
			k.src.Scopes = append(k.src.Scopes, avail.Scope{Venue: itoa(v.ID), Date: "2031-05-16", PartySize: party})
		}
	}
	tel := stream.Telemetry{Logger: slog.New(slog.DiscardHandler)}
	for i := range n {
		c := cfg
		c.Shared, c.Telemetry, c.Egress = rdb, tel, egresstest.Allow(t, srv.URL)
		c.Owner = "copy-" + itoa(int64(i))
		c.UserAgent = "dropstream-test/" + c.Owner
		col, err := collector.NewCollector(k.topics, stream.NewPublisher(rdb, tel), c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = col.Close() })
		if err := col.Upsert(k.src); err != nil {
			t.Fatal(err)
		}
		k.cs, k.agents = append(k.cs, col), append(k.agents, c.UserAgent)
	}
	return k
}

// runs returns the source's raw runs, every partition.
func (k *copies) runs(t *testing.T) []avail.RawRun {
	t.Helper()
	var out []avail.RawRun
	for _, r := range decodeAll[avail.RawRun](t, messages(t, k.rdb, k.topics.Raw)) {
		if r.SourceID == k.src.ID {
			out = append(out, r)
		}
	}
	return out
}

// sourceTransitions returns the kinds of the source's transitions, in order.
func (k *copies) sourceTransitions(t *testing.T) []string {
	t.Helper()
	var kinds []string
	for _, tr := range decodeAll[avail.Transition](t, messages(t, k.rdb, k.topics.Transitions)) {
		if tr.Entity.Key == avail.SourceKey(k.src.ID) {
			kinds = append(kinds, tr.Kind)
		}
	}
	return kinds
}

// Two collectors running the same source poll each scope once per
// interval between them, and both take part.
func TestCollector_copiesShareTheScheduleOfEveryScope(t *testing.T) {
	for _, b := range sharedBackends() {
		t.Run(b.Name, func(t *testing.T) {
			k := newCopies(t, b.Client(t), 2, 2, collector.CollectorConfig{})
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for _, c := range k.cs {
				wg.Go(func() { _ = c.Run(ctx) })
			}
			const perScope = 5
			testenv.WaitFor(t, 60*time.Second, func() bool { return len(k.runs(t)) >= perScope*len(k.src.Scopes) },
				"%d polls of each of the %d scopes", perScope, len(k.src.Scopes))
			cancel()
			wg.Wait()

			byScope := map[string][]avail.RawRun{}
			for _, r := range k.runs(t) {
				byScope[r.ScopeKey] = append(byScope[r.ScopeKey], r)
			}
			// A scope's gate stays closed from the start of a poll until the
			// next is due (the interval, less the 10% jitter), whichever copy
			// polls.
			minGap := 900*time.Millisecond - 5*time.Millisecond
			for scope, runs := range byScope {
				slices.SortFunc(runs, func(a, b avail.RawRun) int { return a.StartedAt.Compare(b.StartedAt) })
				for i := 1; i < len(runs); i++ {
					if gap := runs[i].StartedAt.Sub(runs[i-1].StartedAt); gap < minGap {
						t.Errorf("scope %s polled twice within %v (runs %s and %s): want one poll per interval between the copies",
							scope, gap, runs[i-1].RunID, runs[i].RunID)
					}
				}
			}
			if len(byScope) != len(k.src.Scopes) {
				t.Errorf("%d scopes polled, want %d", len(byScope), len(k.src.Scopes))
			}
			by := map[string]int{}
			for _, r := range k.sim.Requests() {
				by[r.UserAgent]++
			}
			for _, a := range k.agents {
				if by[a] == 0 {
					t.Errorf("copy %s polled nothing (%v): the copies did not share the polls", a, by)
				}
			}
		})
	}
}

// The consecutive failures of a source count every copy's runs: it goes
// down once, after DownAfter failed runs whichever copy made them, and up
// once; one copy publishes each transition, and Store.Health shows it. A
// transition that cannot be published leaves the source as it was, so the
// next run flips it again.
func TestCollector_copiesShareTheSourceHealth(t *testing.T) {
	for _, b := range sharedBackends() {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			k := newCopies(t, b.Client(t), 1, 2, collector.CollectorConfig{DownAfter: 3, NoJitter: true})
			k.src.Scopes = k.src.Scopes[:1]
			for _, c := range k.cs {
				if err := c.Upsert(k.src); err != nil {
					t.Fatal(err)
				}
			}
			store := collector.NewStore(k.rdb)
			if err := store.Put(ctx, k.src); err != nil {
				t.Fatal(err)
			}
			poll := func(i int) error { return k.cs[i%2].PollOnce(ctx, k.src.ID) }
			health := func() collector.SourceHealth {
				t.Helper()
				h, ok, err := store.Health(ctx, k.src.ID)
				if err != nil || !ok {
					t.Fatalf("Store.Health = %+v, %v, %v", h, ok, err)
				}
				if _, got, ok, err := store.GetWithHealth(ctx, tenancy.View{All: true}, k.src.ID); err != nil || !ok || got != h {
					t.Fatalf("Store.GetWithHealth health = %+v, %v, %v; want %+v as Health", got, ok, err, h)
				}
				return h
			}

			k.sim.Fail(simtest.Failure{Mode: simtest.FailServerError})
			for i := range 2 {
				if err := poll(i); err != nil {
					t.Fatal(err)
				}
			}
			if h := health(); h.ConsecutiveFailures != 2 || h.Down {
				t.Fatalf("after two failed runs, one per copy: %+v; want 2 failures, up", h)
			}

			// The third failure flips the source down, but its transition
			// cannot be published: the flip is undone.
			part := k.topics.Transitions.Stream(k.topics.Transitions.Partition(avail.SourceKey(k.src.ID)))
			if err := k.rdb.Set(ctx, part, "not a stream", 0).Err(); err != nil {
				t.Fatal(err)
			}
			if err := poll(2); err == nil {
				t.Fatal("a source transition was published to a string")
			}
			if h := health(); h.Down || h.ConsecutiveFailures != 3 {
				t.Fatalf("after an unpublished flip: %+v; want 3 failures, still up", h)
			}
			if err := k.rdb.Del(ctx, part).Err(); err != nil {
				t.Fatal(err)
			}
			for i := 3; i < 6; i++ {
				if err := poll(i); err != nil {
					t.Fatal(err)
				}
			}
			if h := health(); !h.Down || h.Status != collector.StatusDown || h.ConsecutiveFailures != 6 {
				t.Fatalf("after six failed runs: %+v; want down with 6 failures", h)
			}
			if got := k.sourceTransitions(t); !slices.Equal(got, []string{avail.KindClose}) {
				t.Fatalf("source transitions %v, want one close", got)
			}

			k.sim.ClearFailures()
			for i := range 3 {
				if err := poll(i); err != nil {
					t.Fatal(err)
				}
			}
			if h := health(); h.Down || h.Status != collector.StatusUp || h.ConsecutiveFailures != 0 {
				t.Errorf("after the source recovered: %+v; want up with no failures", h)
			}
			if got := k.sourceTransitions(t); !slices.Equal(got, []string{avail.KindClose, avail.KindOpen}) {
				t.Errorf("source transitions %v, want one close then one open", got)
			}
			if err := store.Delete(ctx, k.src.ID); err != nil {
				t.Fatal(err)
			}
			if _, ok, err := store.Health(ctx, k.src.ID); ok || err != nil {
				t.Errorf("health of a deleted source: %v, %v; want none", ok, err)
			}
		})
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func randomSuffix() string { return strconv.FormatInt(time.Now().UnixNano(), 36) }
