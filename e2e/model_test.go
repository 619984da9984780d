package e2e

import (
	"reflect"
	"sort"
	"testing"
	"time"
)

// truthRun is one applied run of a scope as the simulator's truth gives it:
// the run id the collector gave the poll and the keys open at that tick.
type truthRun struct {
	runID string
	at    time.Time // the run's run_at
	open  map[string]bool
}

// stableOpen is an opening the diff must confirm: the entity, the run that
// confirmed it (k runs after the raw open), the run of its raw open (which
// names its session) and whether it belongs to the scope's baseline.
type stableOpen struct {
	entity     string
	runID      string
	sessionRun string
	baseline   bool
}

// pendingFlip is an entity whose raw state differs from its stable state.
type pendingFlip struct {
	count    int
	baseline bool
	rawRun   string
}

// stabilize computes, independently of the diff package, the stable opens
// of one scope's sequence of applied runs under stabilization k, and the
// stable state ("open" or "closed") each entity ends in, for those with a
// stable transition: every entity starts stably closed; a raw state that
// differs from the stable state for k consecutive runs becomes the stable
// state, and a raw state that returns to the stable state first cancels
// the flip. Opens first seen in the scope's first run are baseline.
func stabilize(runs []truthRun, k int) ([]stableOpen, map[string]string) {
	stable := map[string]bool{}
	final := map[string]string{}
	pend := map[string]pendingFlip{}
	var out []stableOpen
	for i, run := range runs {
		keys := map[string]bool{}
		for e := range run.open {
			keys[e] = true
		}
		for e := range pend {
			keys[e] = true
		}
		for e, open := range stable {
			if open {
				keys[e] = true
			}
		}
		for _, e := range sortedKeys(keys) {
			raw := run.open[e]
			if raw == stable[e] {
				delete(pend, e)
				continue
			}
			p, ok := pend[e]
			if !ok {
				p = pendingFlip{baseline: i == 0 && raw, rawRun: run.runID}
			}
			p.count++
			if p.count < k {
				pend[e] = p
				continue
			}
			delete(pend, e)
			stable[e] = raw
			final[e] = "closed"
			if raw {
				final[e] = "open"
				out = append(out, stableOpen{entity: e, runID: run.runID, sessionRun: p.rawRun, baseline: p.baseline})
			}
		}
	}
	return out, final
}

// window is one raw open window of an entity: the runs of its raw open and
// of the raw close that ended it ("" while open), their times, and the time
// of the last run that saw it open before the close.
type window struct {
	openRun, closeRun       string
	openAt, closeAt, seenAt time.Time
}

// rawWindows returns the raw open windows of every entity of a scope's
// runs, oldest first.
func rawWindows(runs []truthRun) map[string][]window {
	out := map[string][]window{}
	prev := truthRun{}
	for _, run := range runs {
		for e := range run.open {
			if !prev.open[e] {
				out[e] = append(out[e], window{openRun: run.runID, openAt: run.at})
			}
		}
		for e := range prev.open {
			if !run.open[e] {
				w := &out[e][len(out[e])-1]
				w.closeRun, w.closeAt, w.seenAt = run.runID, run.at, prev.at
			}
		}
		prev = run
	}
	return out
}

// countRawFlips returns the raw opens and closes of a scope's runs: every
// key open in a run and not in the one before (the first run opens all it
// sees), and every key open before and not any more.
func countRawFlips(runs []truthRun) (opens, closes int) {
	prev := map[string]bool{}
	for _, run := range runs {
		for e := range run.open {
			if !prev[e] {
				opens++
			}
		}
		for e := range prev {
			if !run.open[e] {
				closes++
			}
		}
		prev = run.open
	}
	return opens, closes
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func set(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// TestStabilize_rules checks the test's own model of stabilization and raw
// windows on hand-made sequences, so the end-to-end expectations rest on it.
func TestStabilize_rules(t *testing.T) {
	tests := []struct {
		name        string
		runs        [][]string // open keys per run, run i is "r<i>"
		k           int
		want        []stableOpen
		wantStable  map[string]string
		wantWindows []window // of entity "a", without times
	}{
		{name: "baseline confirmed by the second run", runs: [][]string{{"a"}, {"a"}}, k: 2,
			want:       []stableOpen{{entity: "a", runID: "r1", sessionRun: "r0", baseline: true}},
			wantStable: map[string]string{"a": "open"}, wantWindows: []window{{openRun: "r0"}}},
		{name: "baseline not confirmed is no open", runs: [][]string{{"a"}, {}}, k: 2,
			wantStable: map[string]string{}, wantWindows: []window{{openRun: "r0", closeRun: "r1"}}},
		{name: "open after baseline confirmed after two runs", runs: [][]string{{}, {"a"}, {"a"}, {"a"}}, k: 2,
			want:       []stableOpen{{entity: "a", runID: "r2", sessionRun: "r1"}},
			wantStable: map[string]string{"a": "open"}, wantWindows: []window{{openRun: "r1"}}},
		{name: "flapping never stabilizes", runs: [][]string{{}, {"a"}, {}, {"a"}, {}}, k: 2,
			wantStable: map[string]string{}, wantWindows: []window{{openRun: "r1", closeRun: "r2"}, {openRun: "r3", closeRun: "r4"}}},
		{name: "a new window after a stable close notifies again",
			runs: [][]string{{}, {"a"}, {"a"}, {}, {}, {"a"}, {"a"}}, k: 2,
			want:       []stableOpen{{entity: "a", runID: "r2", sessionRun: "r1"}, {entity: "a", runID: "r6", sessionRun: "r5"}},
			wantStable: map[string]string{"a": "open"}, wantWindows: []window{{openRun: "r1", closeRun: "r3"}, {openRun: "r5"}}},
		{name: "a stable close", runs: [][]string{{"a"}, {"a"}, {}, {}}, k: 2,
			want:       []stableOpen{{entity: "a", runID: "r1", sessionRun: "r0", baseline: true}},
			wantStable: map[string]string{"a": "closed"}, wantWindows: []window{{openRun: "r0", closeRun: "r2"}}},
		{name: "a short close inside a stable window is no new open",
			runs: [][]string{{}, {"a"}, {"a"}, {}, {"a"}, {"a"}}, k: 2,
			want:       []stableOpen{{entity: "a", runID: "r2", sessionRun: "r1"}},
			wantStable: map[string]string{"a": "open"}, wantWindows: []window{{openRun: "r1", closeRun: "r3"}, {openRun: "r4"}}},
		{name: "cancelled flip restarts the count at the next raw open",
			runs: [][]string{{}, {"a"}, {}, {"a"}, {"a"}}, k: 2,
			want:       []stableOpen{{entity: "a", runID: "r4", sessionRun: "r3"}},
			wantStable: map[string]string{"a": "open"}, wantWindows: []window{{openRun: "r1", closeRun: "r2"}, {openRun: "r3"}}},
		{name: "stabilization 3", runs: [][]string{{}, {"a", "b"}, {"a", "b"}, {"a"}}, k: 3,
			want:       []stableOpen{{entity: "a", runID: "r3", sessionRun: "r1"}},
			wantStable: map[string]string{"a": "open"}, wantWindows: []window{{openRun: "r1"}}},
		{name: "stabilization 1 confirms on the flip", runs: [][]string{{"a"}, {"a", "b"}}, k: 1,
			want:       []stableOpen{{entity: "a", runID: "r0", sessionRun: "r0", baseline: true}, {entity: "b", runID: "r1", sessionRun: "r1"}},
			wantStable: map[string]string{"a": "open", "b": "open"}, wantWindows: []window{{openRun: "r0"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := time.Date(2031, 5, 16, 12, 0, 0, 0, time.UTC)
			at := func(run string) time.Time { return base.Add(time.Duration(run[1]-'0') * time.Minute) }
			runs := make([]truthRun, len(tt.runs))
			for i, open := range tt.runs {
				id := "r" + string(rune('0'+i))
				runs[i] = truthRun{runID: id, at: at(id), open: set(open...)}
			}
			got, stable := stabilize(runs, tt.k)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("stable opens = %+v, want %+v", got, tt.want)
			}
			if !reflect.DeepEqual(stable, tt.wantStable) {
				t.Errorf("stable states = %v, want %v", stable, tt.wantStable)
			}
			var ws []window
			for _, w := range rawWindows(runs)["a"] {
				ws = append(ws, window{openRun: w.openRun, closeRun: w.closeRun})
				if !w.openAt.Equal(at(w.openRun)) || w.closeRun != "" && (!w.closeAt.Equal(at(w.closeRun)) ||
					!w.seenAt.Equal(at(w.closeRun).Add(-time.Minute))) || w.closeRun == "" && !w.closeAt.IsZero() {
					t.Errorf("window %+v: times do not match its runs", w)
				}
			}
			if !reflect.DeepEqual(ws, tt.wantWindows) {
				t.Errorf("windows of a = %v, want %v", ws, tt.wantWindows)
			}
			var opens, closes int
			for _, ws := range rawWindows(runs) {
				for _, w := range ws {
					opens++
					if w.closeRun != "" {
						closes++
					}
				}
			}
			if o, c := countRawFlips(runs); o != opens || c != closes {
				t.Errorf("raw flips = %d opens, %d closes; the windows say %d, %d", o, c, opens, closes)
			}
		})
	}
}
