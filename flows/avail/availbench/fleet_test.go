package availbench

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/diff"
)

func TestFleet_slidesItsWindowByTheChurn(t *testing.T) {
	const perScope, churn = 100, 3
	f := newFleet(2, perScope, churn)
	at := time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
	// run returns the entities scope s's next snapshot observes. (Whether
	// opensNext predicts the diff's notifying opens is checked end to end
	// by the bench's own run, which compares it with what is notified.)
	run := func(s int) map[string]bool {
		snap := f.next(s, at)
		at = at.Add(time.Minute)
		if err := diff.Validate(snap); err != nil {
			t.Fatalf("snapshot of scope %d: %v", s, err)
		}
		out := map[string]bool{}
		for _, e := range snap.Entities {
			out[e.Key] = true
		}
		if len(out) != perScope {
			t.Fatalf("run of scope %d observes %d distinct entities, want %d", s, len(out), perScope)
		}
		return out
	}
	prev := run(0)
	for r := 1; r < 8; r++ {
		cur := run(0)
		changed := 0
		for k := range cur {
			if !prev[k] {
				changed++
			}
		}
		if want := map[bool]int{true: 0, false: churn}[r == 1]; changed != want {
			t.Fatalf("run %d replaced %d entities, want %d", r, changed, want)
		}
		prev = cur
	}
	if other := run(1); len(other) != perScope || slices.ContainsFunc(slices.Collect(maps.Keys(other)),
		func(k string) bool { return !strings.Contains(k, venue(1)) }) {
		t.Fatal("scope 1 observes entities of another venue")
	}
}

func TestConfig_validate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string // "" means valid
	}{
		{"defaults", Config{}, ""},
		{"scopes", Config{Scopes: -1}, "scopes"},
		{"per scope", Config{PerScope: MaxPerScope + 1}, "per scope"},
		{"churn", Config{Churn: 1.5}, "churn"},
		{"runs", Config{Runs: -2}, "runs"},
		{"copies", Config{DiffCopies: 65}, "copies"},
		{"rate", Config{Rate: -1}, "rate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.WithDefaults().Validate()
			if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("Validate() = %v, want %q", err, tt.want)
			}
		})
	}
	if c := (Config{PerScope: 10}).WithDefaults(); c.churned() != 1 {
		t.Fatalf("1%% of 10 entities churns %d, want at least 1", c.churned())
	}
}
