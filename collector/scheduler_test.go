package collector_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/dropstream/dropstream/collector"
	"github.com/dropstream/dropstream/collector/provider"
	"github.com/dropstream/dropstream/collector/simulator"
	"github.com/dropstream/dropstream/collector/simulator/simtest"
)

// startRun runs the collector until the test ends.
func (e *env) startRun() {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.c.Run(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("Run = %v", err)
		}
	})
}

// waitSchedule waits until the schedule holds exactly the due times want
// (relative to t0), in order.
func (e *env) waitSchedule(want ...time.Duration) {
	e.t.Helper()
	var got []time.Duration
	deadline := time.Now().Add(30 * time.Second)
	poll := time.NewTicker(2 * time.Millisecond)
	defer poll.Stop()
	for ; ; <-poll.C {
		got = got[:0]
		for _, p := range e.c.Schedule() {
			got = append(got, p.Due.Sub(t0))
		}
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("schedule %v, want %v", got, want)
		}
	}
}

func (e *env) waitRuns(n int) {
	e.t.Helper()
	waitFor(e.t, func() bool { return len(e.runs()) >= n }, "runs")
	if got := len(e.runs()); got != n {
		e.t.Fatalf("%d runs, want %d", got, n)
	}
}

func TestRun_pollsEveryScopeEveryInterval(t *testing.T) {
	e := newEnv(t, simulator.Config{}, collector.CollectorConfig{NoJitter: true})
	src := e.source("s", provider.Resy, scopeA, scopeB)
	src.Interval = 10 * time.Second
	e.upsert(src)
	e.startRun()
	for round := range 3 {
		e.waitRuns(2 * (round + 1))
		next := time.Duration(round+1) * 10 * time.Second
		e.waitSchedule(next, next)
		e.clock.Advance(10 * time.Second)
	}
	for i, run := range e.runs() {
		if want := t0.Add(time.Duration(i/2) * 10 * time.Second); !run.StartedAt.Equal(want) {
			t.Errorf("run %d at %v, want %v", i, run.StartedAt, want)
		}
	}
}

func TestRun_backsOffWhileTheSourceFails(t *testing.T) {
	e := newEnv(t, simulator.Config{}, collector.CollectorConfig{NoJitter: true, MaxBackoff: 30 * time.Second, DownAfter: 100})
	src := e.source("s", provider.Resy, scopeA)
	src.Interval = 10 * time.Second
	e.upsert(src)
	e.sim.Fail(simtest.Failure{Mode: simtest.FailServerError})
	e.startRun()
	// Failures 1, 2, 3, 4 wait 10s, 20s, 40s capped to 30s, 30s.
	delays := []time.Duration{10 * time.Second, 20 * time.Second, 30 * time.Second, 30 * time.Second}
	at := time.Duration(0)
	for i, delay := range delays {
		e.waitRuns(i + 1)
		at += delay
		e.waitSchedule(at)
		if i == len(delays)-1 {
			// Before the advance that starts run 5, which may poll at once.
			e.sim.ClearFailures()
		}
		e.clock.Advance(delay)
	}
	e.waitRuns(5)
	e.waitSchedule(at + 10*time.Second) // back to the interval
}

func TestRun_throttlingDelaysTheNextPollAndTheWholeProvider(t *testing.T) {
	e := newEnv(t, simulator.Config{}, collector.CollectorConfig{NoJitter: true})
	a := e.source("a", provider.Resy, scopeA)
	a.Interval = 10 * time.Second
	e.upsert(a)
	e.sim.Fail(simtest.Failure{Mode: simtest.FailThrottle, Times: 1, RetryAfter: "120"})
	e.startRun()
	e.waitRuns(1)
	e.waitSchedule(120 * time.Second) // Retry-After beats the interval
	b := e.source("b", provider.Resy, scopeB)
	e.upsert(b) // same host: held by the pause too
	e.waitSchedule(120*time.Second, 120*time.Second)
	e.clock.Advance(120 * time.Second)
	e.waitRuns(2)
	// After the pause, requests resume one at a time at the rate limit
	// (1000/s): b went first, a follows 1ms later.
	e.waitSchedule(120*time.Second+time.Millisecond, 180*time.Second)
	e.clock.Advance(time.Millisecond)
	e.waitRuns(3)
	if runs := e.runs(); runs[1].SourceID != "b" || runs[2].SourceID != "a" {
		t.Errorf("runs after the pause by %s then %s, want b then a", runs[1].SourceID, runs[2].SourceID)
	}
}

func TestRun_sharesTheRateLimitOfAHostBetweenSources(t *testing.T) {
	e := newEnv(t, simulator.Config{}, collector.CollectorConfig{NoJitter: true, Burst: 1})
	for _, id := range []string{"a", "b"} {
		src := e.source(id, provider.OpenTable, scopeA, scopeB)
		src.RateLimit = 1
		e.upsert(src)
	}
	e.startRun()
	e.waitRuns(1)
	e.waitSchedule(time.Second, 2*time.Second, 3*time.Second, time.Minute)
	for i := 2; i <= 4; i++ {
		e.clock.Advance(time.Second)
		e.waitRuns(i)
	}
	for i, run := range e.runs() {
		if want := t0.Add(time.Duration(i) * time.Second); !run.StartedAt.Equal(want) {
			t.Errorf("run %d at %v, want %v", i, run.StartedAt, want)
		}
	}
}

func TestRun_dropsPausedSourcesFromTheSchedule(t *testing.T) {
	e := newEnv(t, simulator.Config{}, collector.CollectorConfig{NoJitter: true})
	e.sim.SetToken("tok")
	src := e.source("s", provider.Resy, scopeA)
	src.AuthToken = "expired"
	e.upsert(src)
	e.startRun()
	e.waitRuns(1)
	waitFor(t, func() bool { h, _ := e.c.Health("s"); return h.Paused }, "the pause")
	e.waitSchedule()
	src.AuthToken = "tok"
	e.upsert(src)
	e.waitRuns(2)
	e.waitSchedule(time.Minute)
}

func TestRun_followsTheStore(t *testing.T) {
	rdb := newRedis(t)
	store := collector.NewStore(rdb)
	e := newEnv(t, simulator.Config{}, collector.CollectorConfig{NoJitter: true, Store: store, RefreshInterval: 5 * time.Second})
	ctx := context.Background()
	if err := store.Put(ctx, e.source("s", provider.Resy, scopeA)); err != nil {
		t.Fatal(err)
	}
	e.startRun()
	e.waitRuns(1)
	if err := store.Delete(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	e.waitSchedule(time.Minute)
	e.clock.Advance(5 * time.Second)
	waitFor(t, func() bool { return len(e.c.Sources()) == 0 }, "the source to go")
	e.waitSchedule()
}

func TestRun_onlyOnce(t *testing.T) {
	e := newEnv(t, simulator.Config{}, collector.CollectorConfig{NoJitter: true})
	e.upsert(e.source("s", provider.Resy, scopeA))
	e.startRun()
	e.waitRuns(1) // Run is running
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.c.Run(ctx); err == nil {
		t.Error("a second Run was accepted")
	}
}
