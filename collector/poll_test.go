package collector_test

import (
	"context"
	"errors"
	"fmt"
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

var (
	scopeA = avail.Scope{Venue: "1001", Date: "2026-11-21", PartySize: 2}
	scopeB = avail.Scope{Venue: "1002", Date: "2026-11-21", PartySize: 4}
	scopeC = avail.Scope{Date: "2026-11-22", PartySize: 2}
)

func TestCollector_pollOncePublishesOneOkRunPerScope(t *testing.T) {
	for _, prov := range provider.Names() {
		t.Run(prov, func(t *testing.T) {
			e := newEnv(t, simulator.Config{}, collector.CollectorConfig{})
			e.sim.SetToken("tok")
			src := e.source("src-1", prov, scopeA, scopeB, scopeC)
			src.AuthToken, src.RestaurantLevel, src.NotifyFirstSight = "tok", true, true
			e.upsert(src)
			if err := e.c.PollOnce(context.Background(), "src-1"); err != nil {
				t.Fatal(err)
			}
			runs := e.runs()
			if len(runs) != 3 {
				t.Fatalf("%d runs, want 3", len(runs))
			}
			ids := map[string]bool{}
			for i, run := range runs {
				sc := src.Scopes[i]
				if run.Status != avail.StatusOK || run.HTTPStatus != 200 || len(run.Body) == 0 || run.Error != "" {
					t.Errorf("run %d: status %s HTTP %d error %q body %d bytes, want an ok run with a body",
						i, run.Status, run.HTTPStatus, run.Error, len(run.Body))
				}
				if run.Scope != sc || run.ScopeKey != sc.Key("src-1") || run.SourceID != "src-1" || run.Provider != prov {
					t.Errorf("run %d is about %+v of %s/%s, want %+v", i, run.Scope, run.SourceID, run.Provider, sc)
				}
				if run.Stabilization != collector.DefaultStabilization || !run.RestaurantLevel || !run.NotifyFirstSight {
					t.Errorf("run %d options %d/%v/%v not copied from the source", i, run.Stabilization, run.RestaurantLevel, run.NotifyFirstSight)
				}
				if !run.StartedAt.Equal(t0) || !run.FinishedAt.Equal(t0) {
					t.Errorf("run %d at %v-%v, want the clock's %v", i, run.StartedAt, run.FinishedAt, t0)
				}
				if len(run.RunID) != 26 || ids[run.RunID] {
					t.Errorf("run id %q not a fresh 26-character id", run.RunID)
				}
				ids[run.RunID] = true
			}
			for _, r := range e.sim.Requests() {
				if r.Authorization != "Bearer tok" || r.UserAgent != collector.DefaultUserAgent || r.Status != 200 {
					t.Errorf("request %+v: want the bearer token, the user agent and 200", r)
				}
			}
			h, err := e.c.Health("src-1")
			if err != nil || h.Status != collector.StatusUp || !h.LastSuccess.Equal(t0) || h.LastRunID != runs[2].RunID {
				t.Errorf("health %+v, %v; want up with the last run", h, err)
			}
		})
	}
}

func TestCollector_rateLimitSpacesRequestsOnTheClock(t *testing.T) {
	e := newEnv(t, simulator.Config{}, collector.CollectorConfig{Burst: 1})
	src := e.source("slow", provider.Resy, scopeA, scopeB, scopeC)
	src.RateLimit = 2 // one request every 500ms
	e.upsert(src)
	done := e.pollAsync("slow")
	for i := 1; i <= 2; i++ {
		if at := e.waitAlarm(); !at.Equal(t0.Add(time.Duration(i) * 500 * time.Millisecond)) {
			t.Fatalf("turn %d at %v, want %v", i+1, at, t0.Add(time.Duration(i)*500*time.Millisecond))
		}
		e.clock.Advance(500 * time.Millisecond)
	}
	if err := wait(t, done); err != nil {
		t.Fatal(err)
	}
	runs := e.runs()
	for i, want := range []time.Duration{0, 500 * time.Millisecond, time.Second} {
		if !runs[i].StartedAt.Equal(t0.Add(want)) {
			t.Errorf("run %d started at %v, want t0+%v", i, runs[i].StartedAt, want)
		}
	}
}

func TestCollector_throttledRunHoldsTheProviderForRetryAfter(t *testing.T) {
	tests := []struct {
		name, header string
		wait         time.Duration
	}{
		{"seconds", "7", 7 * time.Second},
		{"HTTP date", t0.Add(30 * time.Second).Format(http.TimeFormat), 30 * time.Second},
		{"none: the default", "-", 45 * time.Second},
		{"unreadable: the default", "soon", 45 * time.Second},
		{"beyond the cap", "86400", 2 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, simulator.Config{}, collector.CollectorConfig{DefaultRetryAfter: 45 * time.Second, MaxRetryAfter: 2 * time.Minute})
			e.upsert(e.source("busy", provider.Resy, scopeA, scopeB))
			e.sim.Fail(simtest.Failure{Mode: simtest.FailThrottle, Venue: "1001", Times: 1, RetryAfter: tt.header})
			done := e.pollAsync("busy")
			if at := e.waitAlarm(); !at.Equal(t0.Add(tt.wait)) {
				t.Fatalf("next request held until %v, want t0+%v", at, tt.wait)
			}
			e.clock.Advance(tt.wait)
			if err := wait(t, done); err != nil {
				t.Fatal(err)
			}
			runs := e.runs()
			if len(runs) != 2 {
				t.Fatalf("%d runs, want 2", len(runs))
			}
			if r := runs[0]; r.Status != avail.StatusFailed || r.HTTPStatus != 429 || r.Error != "http_4xx: HTTP 429" || len(r.Body) != 0 {
				t.Errorf("run 0 = %s HTTP %d %q, want a failed throttled run without body", r.Status, r.HTTPStatus, r.Error)
			}
			if r := runs[1]; r.Status != avail.StatusOK || !r.StartedAt.Equal(t0.Add(tt.wait)) {
				t.Errorf("run 1 = %s at %v, want ok at t0+%v", r.Status, r.StartedAt, tt.wait)
			}
		})
	}
}

func TestCollector_expiredAuthPausesTheSourceUntilItsConfigChanges(t *testing.T) {
	tests := []struct {
		name   string
		expire func(*simtest.Sim)
		status int
	}{
		{"401 after a token rotation", func(s *simtest.Sim) { s.SetToken("rotated") }, 401},
		{"403", func(s *simtest.Sim) { s.Fail(simtest.Failure{Mode: simtest.FailForbidden, Times: 1}) }, 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, simulator.Config{}, collector.CollectorConfig{})
			e.sim.SetToken("tok")
			src := e.source("auth", provider.OpenTable, scopeA, scopeB)
			src.AuthToken = "tok"
			e.upsert(src)
			if err := e.c.PollOnce(context.Background(), "auth"); err != nil {
				t.Fatal(err)
			}
			tt.expire(e.sim)
			if err := e.c.PollOnce(context.Background(), "auth"); !errors.Is(err, collector.ErrAuthExpired) {
				t.Fatalf("PollOnce after expiry = %v, want ErrAuthExpired", err)
			}
			runs := e.runs()
			if len(runs) != 3 {
				t.Fatalf("%d runs, want 2 ok and 1 refused: the second scope is not asked", len(runs))
			}
			if r := runs[2]; r.Status != avail.StatusFailed || r.HTTPStatus != tt.status || r.Error != fmt.Sprintf("http_4xx: HTTP %d", tt.status) {
				t.Errorf("refused run = %s HTTP %d %q", r.Status, r.HTTPStatus, r.Error)
			}
			h, _ := e.c.Health("auth")
			if h.Status != collector.StatusAuthExpired || !h.Paused || !h.Down {
				t.Errorf("health %+v, want auth_expired, paused and down", h)
			}
			// Blind at once: the source's watchers hear of it with the refusal.
			if trs := e.transitions(); len(trs) != 1 || trs[0].Kind != avail.KindClose || trs[0].RunID != runs[2].RunID ||
				trs[0].Entity.Attrs["status"] != collector.StatusAuthExpired {
				t.Errorf("transitions after the refusal %+v, want the source's close by the refused run", trs)
			}
			asked := len(e.sim.Requests())
			e.upsert(src) // the same configuration: still paused
			if err := e.c.PollOnce(context.Background(), "auth"); !errors.Is(err, collector.ErrAuthExpired) {
				t.Errorf("PollOnce of a paused source = %v, want ErrAuthExpired", err)
			}
			if n := len(e.sim.Requests()); n != asked {
				t.Errorf("a paused source sent %d requests", n-asked)
			}
			e.sim.SetToken("rotated")
			src.AuthToken = "rotated"
			e.upsert(src)
			if err := e.c.PollOnce(context.Background(), "auth"); err != nil {
				t.Fatalf("PollOnce after a new token = %v", err)
			}
			if h, _ := e.c.Health("auth"); h.Status != collector.StatusUp || h.Paused || h.Down {
				t.Errorf("health after a new token %+v, want up", h)
			}
			if trs := e.transitions(); len(trs) != 2 || trs[1].Kind != avail.KindOpen {
				t.Errorf("transitions after a new token %+v, want the close, then the source's open", trs)
			}
		})
	}
}

func TestCollector_malformedAnswerIsAFailedPoll(t *testing.T) {
	e := newEnv(t, simulator.Config{}, collector.CollectorConfig{})
	e.upsert(e.source("m", provider.Resy, scopeA))
	e.sim.Fail(simtest.Failure{Mode: simtest.FailMalformed})
	if err := e.c.PollOnce(context.Background(), "m"); err != nil {
		t.Fatal(err)
	}
	r := e.runs()[0]
	if r.Status != avail.StatusFailed || r.Body != nil || r.Error != "malformed" {
		t.Errorf("run %s, error %q, body %q; want a failed run of class malformed without the body", r.Status, r.Error, r.Body)
	}
	if strings.Contains(r.Error, "invalid JSON") || strings.Contains(r.Error, simtest.DefaultMalformedBody) {
		t.Errorf("run error %q repeats the parser's account of the answer", r.Error)
	}
	h, err := e.c.Health("m")
	if err != nil {
		t.Fatal(err)
	}
	if h.ConsecutiveFailures != 1 || h.LastError != "malformed" {
		t.Errorf("health %+v, want one failure of class malformed", h)
	}
}

func TestCollector_pollOnceOfAnUnknownSource(t *testing.T) {
	e := newEnv(t, simulator.Config{}, collector.CollectorConfig{})
	if err := e.c.PollOnce(context.Background(), "nope"); !errors.Is(err, collector.ErrSourceNotFound) {
		t.Errorf("PollOnce = %v, want ErrSourceNotFound", err)
	}
	if _, err := e.c.Health("nope"); !errors.Is(err, collector.ErrSourceNotFound) {
		t.Errorf("Health = %v, want ErrSourceNotFound", err)
	}
}

func TestCollector_pollOnceStopsWhenItsContextEnds(t *testing.T) {
	e := newEnv(t, simulator.Config{}, collector.CollectorConfig{Burst: 1})
	src := e.source("s", provider.Resy, scopeA, scopeB)
	src.RateLimit = 1
	e.upsert(src)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.c.PollOnce(ctx, "s") }()
	e.waitAlarm() // the second scope waits for its turn
	cancel()
	if err := wait(t, done); !errors.Is(err, context.Canceled) {
		t.Errorf("PollOnce = %v, want context.Canceled", err)
	}
	if n := len(e.runs()); n != 1 {
		t.Errorf("%d runs, want the first scope's only", n)
	}
}
