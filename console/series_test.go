package console

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/api/apitest"
	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/internal/tenancy"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// clock is a settable time for the series.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestSeries_keepsTheLast15MinutesInOrder(t *testing.T) {
	stages := []stageRef{{Flow: "f", Name: "a"}, {Flow: "f", Name: "b"}}
	for _, tc := range []struct {
		name     string
		recorded time.Duration // samples every 10s over this long
		advance  time.Duration // then the clock moves on without samples
		want     int           // samples shown
	}{
		{"fewer than the window holds", 3 * 10 * time.Second, 0, 4},
		{"an hour keeps the window's 91", time.Hour, 0, 91},
		{"samples older than 15 minutes fall out", time.Hour, 5 * time.Minute, 61},
		{"none left after a silence of 15 minutes", time.Hour, 16 * time.Minute, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &clock{t: t0}
			s := newSeries(10*time.Second, clk.now)
			for i := 0; time.Duration(i)*10*time.Second <= tc.recorded; i++ {
				clk.t = t0.Add(time.Duration(i) * 10 * time.Second)
				s.record(clk.t, []StageStats{{Throughput: float64(i), Lag: int64(i), Pending: 1, P99Ms: -1}, {Throughput: -float64(i)}})
			}
			last := clk.t
			if n := len(s.samples); n > 91 {
				t.Errorf("the series holds %d samples, want at most 91 (15 minutes of 10s)", n)
			}
			clk.t = clk.t.Add(tc.advance)
			v := s.view(stages)
			if len(v.At) != tc.want || len(v.Stages) != 2 || len(v.Stages[0].Throughput) != tc.want || len(v.Stages[1].P99Ms) != tc.want {
				t.Fatalf("view has %d times and stages %+v, want %d samples of 2 stages", len(v.At), v.Stages, tc.want)
			}
			if tc.want == 0 {
				return
			}
			if !slices.IsSortedFunc(v.At, time.Time.Compare) || !v.At[tc.want-1].Equal(last) {
				t.Errorf("times %v: want ascending up to %v", v.At, last)
			}
			for i, at := range v.At {
				if want := float64(at.Sub(t0) / (10 * time.Second)); v.Stages[0].Throughput[i] != want || v.Stages[1].Throughput[i] != -want {
					t.Errorf("sample at %v: throughput %v and %v, want %v and %v", at, v.Stages[0].Throughput[i], v.Stages[1].Throughput[i], want, -want)
				}
			}
		})
	}
}

func TestSeries_countsRawOpeningsAndClosingsPerMinute(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Second)}
	s := newSeries(10*time.Second, clk.now)
	ev := func(id, change string, at time.Time) flow.Event {
		return flow.Event{Kind: "transition", ID: id, Change: change, Time: at}
	}
	first := []flow.Event{
		ev("o1", "open", t0.Add(20*time.Second)),
		ev("o2", "open", t0.Add(-50*time.Second)),
		ev("c1", "close", t0.Add(-40*time.Second)),
		ev("s1", "", t0), // a confirmation, not a flip
		ev("old", "close", t0.Add(-20*time.Minute)),
		{Kind: "notification", ID: "n1", Summary: "open (raw)", Time: t0},
	}
	s.countTransitions("avail", first)
	// The next read holds the same newest events and one more: only
	// that one counts.
	clk.t = t0.Add(70 * time.Second)
	s.countTransitions("avail", append([]flow.Event{ev("c2", "close", t0.Add(65*time.Second))}, first...))
	// Another flow's read forgets nothing of this one.
	s.countTransitions("other", nil)
	s.countTransitions("avail", first)

	v := s.view(nil)
	if len(v.Transitions) != 15 || !v.Transitions[14].At.Equal(t0.Add(time.Minute)) {
		t.Fatalf("transitions %+v, want 15 minutes up to %v", v.Transitions, t0.Add(time.Minute))
	}
	got := map[time.Time][2]int{}
	for _, m := range v.Transitions {
		if m.Opened+m.Closed > 0 {
			got[m.At] = [2]int{m.Opened, m.Closed}
		}
	}
	want := map[time.Time][2]int{t0.Add(-time.Minute): {1, 1}, t0: {1, 0}, t0.Add(time.Minute): {0, 1}}
	if len(got) != len(want) {
		t.Errorf("per minute %v, want %v", got, want)
	}
	for at, w := range want {
		if got[at] != w {
			t.Errorf("minute %v: opened, closed %v, want %v", at, got[at], w)
		}
	}
}

func TestSeries_routeShowsTheSamplesOfEveryStage(t *testing.T) {
	rdb := grouped(t, testenv.Backends()[0])
	trans := func(_ context.Context, _ tenancy.View, _ int) ([]flow.Event, error) {
		return []flow.Event{{Kind: "transition", ID: "x", Change: "open", Time: time.Now()}}, nil
	}
	c, err := New(Config{Redis: rdb, SampleInterval: time.Second,
		Flows: []Flow{{Name: "t", Desc: flow.Description{Stages: []stream.Stage{{Name: "t-a", Topic: testTopic}}, Events: trans}}}})
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := apitest.NewServer(t, api.Config{APIKeys: "r:read"})
	c.Register(srv)
	for i := range 3 {
		rdb.XAdd(t.Context(), &redis.XAddArgs{Stream: testTopic.Stream(0), Values: []any{"type", "x", "payload", i}})
		c.sampler.at = time.Time{} // the next stats reads Redis again
		c.sampleSeries(t.Context())
	}
	if r := get(t, srv, "/v1/console/series", ""); r.Status != http.StatusUnauthorized {
		t.Errorf("series without a key = %d, want 401", r.Status)
	}
	var v seriesView
	get(t, srv, "/v1/console/series", "r").JSON(t, &v)
	if v.IntervalS != 1 || len(v.At) != 3 || len(v.Stages) != 1 || v.Stages[0].Stage != "t-a" || !slices.Equal(v.Stages[0].Lag, []int64{1, 2, 3}) {
		t.Errorf("series %+v, want 3 samples of t-a with lag 1, 2, 3", v)
	}
	opened := 0
	for _, m := range v.Transitions {
		opened += m.Opened
	}
	if opened != 1 {
		t.Errorf("transitions %+v, want the one opening", v.Transitions)
	}
}

func TestConfig_Validate_sampleInterval(t *testing.T) {
	for _, tc := range []struct {
		d  time.Duration
		ok bool
	}{{0, true}, {time.Second, true}, {time.Minute, true}, {500 * time.Millisecond, false}, {-time.Second, false}} {
		err := Config{SampleInterval: tc.d}.Validate()
		if !strings.Contains(fmt.Sprint(err), "SampleInterval") != tc.ok {
			t.Errorf("SampleInterval %s: error %v, want ok %v", tc.d, err, tc.ok)
		}
	}
}

func TestRun_samplesUntilItsContextEnds(t *testing.T) {
	rdb := grouped(t, testenv.Backends()[0])
	c, err := New(Config{Redis: rdb, SampleInterval: time.Second,
		Flows: []Flow{{Name: "t", Desc: flow.Description{Stages: []stream.Stage{{Name: "t-a", Topic: testTopic}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := apitest.NewServer(t, api.Config{})
	c.Register(srv)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	testenv.WaitFor(t, 10*time.Second, func() bool {
		var v seriesView
		get(t, srv, "/v1/console/series", "").JSON(t, &v)
		return len(v.At) > 0 && len(v.Stages[0].Lag) == len(v.At)
	}, "a sample in the series")
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v, want nil when its context ends", err)
	}
}
