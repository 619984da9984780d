package simulator_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/collector/simulator"
)

func TestRelease_simulatorHoldsADateUntilItsTime(t *testing.T) {
	at := time.Date(2026, 11, 16, 10, 0, 0, 0, time.UTC)
	var now atomic.Int64
	now.Store(at.Add(-time.Second).UnixNano())
	sim := newSim(t, simulator.Config{Venues: 2, OpenFraction: 1,
		Releases: []simulator.Release{{Venue: 1001, Date: "2026-11-21", At: at}},
		Now:      func() time.Time { return time.Unix(0, now.Load()) }})
	held := avail.Scope{Venue: "1001", Date: "2026-11-21", PartySize: 2}
	tests := []struct {
		name  string
		scope avail.Scope
		now   time.Time
		want  int
	}{
		{"held before its time", held, at.Add(-time.Second), 0},
		{"other venue out", avail.Scope{Venue: "1002", Date: "2026-11-21", PartySize: 2}, at.Add(-time.Second), 8},
		{"other date out", avail.Scope{Venue: "1001", Date: "2026-11-20", PartySize: 2}, at.Add(-time.Second), 8},
		{"out at its time", held, at, 8},
		{"out after", held, at.Add(time.Hour), 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now.Store(tt.now.UnixNano())
			if got := len(sim.Open("resy", tt.scope)); got != tt.want {
				t.Fatalf("%d open slots, want %d", got, tt.want)
			}
		})
	}
}

func TestRelease_simulatorRejectsBadReleases(t *testing.T) {
	at := time.Date(2026, 11, 16, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		rel  simulator.Release
		want string
	}{
		{"unknown date", simulator.Release{Date: "2026-12-01", At: at}, "not one of the dates"},
		{"unknown venue", simulator.Release{Venue: 2000, Date: "2026-11-20", At: at}, "not simulated"},
		{"no time", simulator.Release{Date: "2026-11-20"}, "no time"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := simulator.New(simulator.Config{Releases: []simulator.Release{tt.rel}})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}
