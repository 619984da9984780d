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
	m := diff.NewModel()
	at := time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
	// run applies scope s's next snapshot to the model and returns the
	// entities it observed and the stable opens that notify.
	run := func(s int) (map[string]bool, int) {
		snap := f.next(s, at)
		at = at.Add(time.Minute)
		if err := diff.Validate(snap); err != nil {
			t.Fatalf("snapshot of scope %d: %v", s, err)
		}
		_, trs, _ := m.Apply(snap, "")
		notified := 0
		for _, tr := range trs {
			if tr.Stable && tr.Notify && tr.Kind == "open" {
				notified++
			}
		}
		out := map[string]bool{}
		for _, e := range snap.Entities {
			out[e.Key] = true
		}
		if len(out) != perScope {
			t.Fatalf("run of scope %d observes %d distinct entities, want %d", s, len(out), perScope)
		}
		return out, notified
	}
	prev, _ := run(0)
	for r := 1; r < 8; r++ {
		predicted := f.opensNext(0)
		cur, notified := run(0)
		changed := 0
		for k := range cur {
			if !prev[k] {
				changed++
			}
		}
		if want := map[bool]int{true: 0, false: churn}[r == 1]; changed != want {
			t.Fatalf("run %d replaced %d entities, want %d", r, changed, want)
		}
		if predicted != notified {
			t.Fatalf("run %d: opensNext predicted %d notifying stable opens, the diff model emitted %d", r, predicted, notified)
		}
		prev = cur
	}
	if other, _ := run(1); len(other) != perScope || slices.ContainsFunc(slices.Collect(maps.Keys(other)),
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
