package collector_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/collector"
	"github.com/dropstream/dropstream/collector/provider"
	"github.com/dropstream/dropstream/collector/simulator"
	"github.com/dropstream/dropstream/collector/simulator/simtest"
)

func TestCollector_sourceGoesDownAfterNFailuresAndComesBackUp(t *testing.T) {
	tests := []struct {
		name      string
		downAfter int
		breakIt   func(e *env) (repair func())
		outcome   string
	}{
		{"server errors, default threshold", 0, func(e *env) func() {
			e.sim.Fail(simtest.Failure{Mode: simtest.FailServerError})
			return e.sim.ClearFailures
		}, "HTTP 500"},
		{"throttling, threshold 2", 2, func(e *env) func() {
			e.sim.Fail(simtest.Failure{Mode: simtest.FailThrottle, RetryAfter: "0"})
			return e.sim.ClearFailures
		}, "HTTP 429"},
		{"connection refused, threshold 1", 1, func(e *env) func() {
			src := e.source("s", provider.Resy, scopeA)
			src.BaseURL = "http://127.0.0.1:1"
			e.upsert(src)
			return func() { e.upsert(e.source("s", provider.Resy, scopeA)) }
		}, "refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, simulator.Config{}, collector.CollectorConfig{DownAfter: tt.downAfter})
			threshold := tt.downAfter
			if threshold == 0 {
				threshold = 3 // the default
			}
			e.upsert(e.source("s", provider.Resy, scopeA))
			repair := tt.breakIt(e)
			poll := func() {
				t.Helper()
				// A throttled provider resumes one request at a time:
				// let the rate limit's bucket refill between polls.
				e.clock.Advance(time.Second)
				if err := e.c.PollOnce(context.Background(), "s"); err != nil {
					t.Fatal(err)
				}
			}
			for i := 1; i < threshold; i++ {
				poll()
				if h, _ := e.c.Health("s"); h.Status != collector.StatusUp || h.ConsecutiveFailures != i {
					t.Fatalf("after %d failures: health %+v, want up with %d failures", i, h, i)
				}
			}
			if n := len(e.transitions()); n != 0 {
				t.Fatalf("%d transitions before the threshold", n)
			}
			poll()
			poll() // a further failure changes nothing
			trs := e.transitions()
			runs := e.runs()
			if len(trs) != 1 {
				t.Fatalf("%d transitions after %d failures, want 1", len(trs), threshold+1)
			}
			down := trs[0]
			key := avail.SourceKey("s")
			if down.Kind != avail.KindClose || down.Entity.Key != key || down.Entity.Kind != avail.EntitySource ||
				down.ScopeKey != key || down.SourceID != "s" || !down.Stable || down.RunID != runs[threshold-1].RunID ||
				down.EventID != avail.EventID(down.RunID, key, avail.KindClose, true) ||
				!strings.Contains(down.Entity.Attrs["error"], tt.outcome) || len(down.TraceID) != 32 {
				t.Errorf("down transition %+v, want a stable close of %s by run %s saying %q", down, key, runs[threshold-1].RunID, tt.outcome)
			}
			if h, _ := e.c.Health("s"); h.Status != collector.StatusDown || !h.Down || h.ConsecutiveFailures != threshold+1 ||
				!strings.Contains(h.LastError, tt.outcome) {
				t.Errorf("health %+v, want down", h)
			}
			repair()
			poll()
			poll()
			trs = e.transitions()
			if len(trs) != 2 {
				t.Fatalf("%d transitions after recovery, want 2", len(trs))
			}
			up := trs[1]
			if up.Kind != avail.KindOpen || up.Entity.Key != key || !up.Stable || up.RunID != e.runs()[threshold+1].RunID {
				t.Errorf("up transition %+v, want an open of %s by the first ok run", up, key)
			}
			if h, _ := e.c.Health("s"); h.Status != collector.StatusUp || h.ConsecutiveFailures != 0 || h.Down {
				t.Errorf("health after recovery %+v, want up", h)
			}
		})
	}
}

func TestCollector_timeoutIsAFailedRun(t *testing.T) {
	e := newEnv(t, simulator.Config{}, collector.CollectorConfig{Timeout: 50 * time.Millisecond})
	release := make(chan struct{})
	defer close(release)
	stuck := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	srv := startServer(t, stuck)
	src := e.source("t", provider.Resy, scopeA)
	src.BaseURL = srv
	e.upsert(src)
	if err := e.c.PollOnce(context.Background(), "t"); err != nil {
		t.Fatal(err)
	}
	if r := e.runs()[0]; r.Status != avail.StatusFailed || r.Error != "timeout" || r.HTTPStatus != 0 {
		t.Errorf("run %s HTTP %d %q, want a failed run saying timeout", r.Status, r.HTTPStatus, r.Error)
	}
}

// A source that comes back tells, on its up transition, since when it was
// blind: its last good answer before it went down.
func TestCollector_sourceUpCarriesBlindSince(t *testing.T) {
	e := newEnv(t, simulator.Config{}, collector.CollectorConfig{DownAfter: 2})
	e.upsert(e.source("s", provider.Resy, scopeA))
	poll := func() {
		t.Helper()
		e.clock.Advance(time.Second)
		if err := e.c.PollOnce(context.Background(), "s"); err != nil {
			t.Fatal(err)
		}
	}
	poll()
	h, _ := e.c.Health("s")
	lastGood := h.LastSuccess
	e.sim.Fail(simtest.Failure{Mode: simtest.FailServerError})
	poll()
	poll()
	e.sim.ClearFailures()
	poll()
	trs := e.transitions()
	if len(trs) != 2 || trs[1].Kind != avail.KindOpen {
		t.Fatalf("transitions %+v, want a down and an up", trs)
	}
	if got := trs[1].Entity.Attrs["blind_since"]; got != lastGood.UTC().Format(time.RFC3339Nano) {
		t.Errorf("blind_since = %q, want the last good run's %s", got, lastGood.UTC().Format(time.RFC3339Nano))
	}
	if _, ok := trs[0].Entity.Attrs["blind_since"]; ok {
		t.Error("the down transition carries blind_since")
	}
}
