package collector_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/collector"
	"github.com/dropstream/dropstream/collector/provider"
	"github.com/dropstream/dropstream/collector/simulator"
	"github.com/dropstream/dropstream/collector/simulator/simtest"
)

// day returns t0's day shifted by n days at hh:mm:ss UTC.
func day(n, hh, mm, ss int) time.Time {
	return time.Date(t0.Year(), t0.Month(), t0.Day()+n, hh, mm, ss, 0, time.UTC)
}

func TestRelease_learnsPeaksWithEnoughSupport(t *testing.T) {
	obs := func(venue string, ts ...time.Time) []collector.ReleaseObservation {
		var out []collector.ReleaseObservation
		for i, at := range ts {
			out = append(out, collector.ReleaseObservation{SourceID: "s", Venue: venue, Date: "d" + string(rune('a'+i)), At: at})
		}
		return out
	}
	tests := []struct {
		name string
		obs  []collector.ReleaseObservation
		want []collector.ReleasePeak
	}{
		{"daily minute on three days", obs("1001", day(-3, 10, 0, 20), day(-2, 10, 0, 50), day(-1, 10, 1, 10)),
			[]collector.ReleasePeak{{Weekday: collector.Daily, Minute: 600, Support: 3}}},
		{"two days are too few", obs("1001", day(-2, 10, 0, 0), day(-1, 10, 0, 0)), nil},
		{"one day counts once", obs("1001", day(-1, 10, 0, 0), day(-1, 10, 0, 5), day(-1, 10, 0, 9)), nil},
		{"scattered minutes are no peak", obs("1001", day(-3, 9, 0, 0), day(-2, 13, 0, 0), day(-1, 18, 30, 0)), nil},
		{"a weekday's minute over three weeks", obs("1001", day(-21, 18, 0, 0), day(-14, 18, 0, 30), day(-7, 18, 1, 0), day(-1, 7, 0, 0)),
			[]collector.ReleasePeak{{Weekday: collector.Daily, Minute: 18 * 60, Support: 3}, {Weekday: int(t0.Weekday()), Minute: 18 * 60, Support: 3}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := collector.LearnReleases(tt.obs, 3, time.UTC)
			if got := s.Peaks("s", "1001"); !slices.Equal(got, tt.want) {
				t.Fatalf("peaks %+v, want %+v", got, tt.want)
			}
			if got := s.Peaks("other", "1001"); len(got) != 0 {
				t.Fatalf("peaks of another source %+v", got)
			}
		})
	}
}

// learner is a ReleaseLearner of fixed observations.
type learner struct {
	mu  sync.Mutex
	obs []collector.ReleaseObservation
	err error
}

func (l *learner) ReleaseObservations(context.Context) ([]collector.ReleaseObservation, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.obs, l.err
}

// releasedAt12h10 has venue 1001 of source s release at 12:10 on the last
// three days.
func releasedAt12h10() *learner {
	var obs []collector.ReleaseObservation
	for d := 1; d <= 3; d++ {
		obs = append(obs, collector.ReleaseObservation{SourceID: "s", Venue: "1001", Date: "x", At: day(-d, 12, 10, 30)})
	}
	return &learner{obs: obs}
}

var venueScope = avail.Scope{Venue: "1001", Date: "2026-11-21", PartySize: 2}

func TestRelease_burstsAroundTheLearnedMinute(t *testing.T) {
	l := releasedAt12h10()
	e := newEnv(t, simulator.Config{}, collector.CollectorConfig{NoJitter: true,
		Releases: collector.ReleaseConfig{Learner: l, Burst: 5 * time.Second}})
	src := e.source("s", provider.Resy, venueScope)
	src.Interval = 5 * time.Minute
	e.upsert(src)
	other := e.source("t", provider.Resy, venueScope)
	other.Interval = 5 * time.Minute
	e.upsert(other)
	e.startRun()
	waitFor(t, func() bool { return e.c.Releases().Len() == 1 }, "learned schedule")
	e.waitRuns(2)
	// Both at the normal interval: 12:05 is before the window (12:08-12:13).
	e.waitSchedule(5*time.Minute, 5*time.Minute)
	e.clock.Advance(5 * time.Minute)
	e.waitRuns(4)
	// s comes back at the window's start, t (no learned release) at 12:10.
	e.waitSchedule(8*time.Minute, 10*time.Minute)
	e.clock.Advance(3 * time.Minute)
	e.waitRuns(5)
	e.waitSchedule(8*time.Minute+5*time.Second, 10*time.Minute)
	for i := 1; i < 60; i++ { // every 5s until 12:13; t polls at 12:10 too
		e.clock.Advance(5 * time.Second)
		e.waitRuns(5 + i + min(1, i/24))
	}
	// 12:12:55: the last burst poll brings the window's end, 12:13.
	e.waitSchedule(13*time.Minute, 15*time.Minute)
	e.clock.Advance(5 * time.Second)
	e.waitRuns(66)
	// After the window: the normal interval again.
	e.waitSchedule(15*time.Minute, 18*time.Minute)
	for _, run := range e.runs() {
		if run.SourceID == "t" && run.StartedAt.Sub(t0)%(5*time.Minute) != 0 {
			t.Fatalf("source t polled at %v: off its interval", run.StartedAt)
		}
	}
}

func TestRelease_throttledBurstWaitsOutRetryAfter(t *testing.T) {
	l := releasedAt12h10()
	e := newEnv(t, simulator.Config{}, collector.CollectorConfig{NoJitter: true,
		Releases: collector.ReleaseConfig{Learner: l, Burst: 5 * time.Second}})
	src := e.source("s", provider.Resy, venueScope)
	src.Interval = 9 * time.Minute
	e.clock.Advance(8 * time.Minute) // 12:08, the window's start
	if err := e.c.Learn(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.upsert(src)
	e.startRun()
	e.waitRuns(1)
	e.waitSchedule(8*time.Minute + 5*time.Second)
	e.sim.Fail(simtest.Failure{Mode: simtest.FailThrottle, RetryAfter: "30", Times: 1})
	e.clock.Advance(5 * time.Second)
	e.waitRuns(2)
	// The 429's Retry-After (30s) and not the burst interval.
	e.waitSchedule(8*time.Minute + 35*time.Second)
	e.clock.Advance(30 * time.Second)
	e.waitRuns(3)
	e.waitSchedule(8*time.Minute + 40*time.Second)
}

func TestRelease_learnFailureKeepsTheLastSchedule(t *testing.T) {
	l := releasedAt12h10()
	e := newEnv(t, simulator.Config{}, collector.CollectorConfig{Releases: collector.ReleaseConfig{Learner: l}})
	if err := e.c.Learn(context.Background()); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("clickhouse down")
	l.mu.Lock()
	l.err = boom
	l.mu.Unlock()
	if err := e.c.Learn(context.Background()); !errors.Is(err, boom) {
		t.Fatalf("Learn = %v, want %v", err, boom)
	}
	if got := e.c.Releases().Peaks("s", "1001"); len(got) != 1 || got[0].Minute != 12*60+10 {
		t.Fatalf("peaks after a failed learning %+v, want the last ones", got)
	}
}
