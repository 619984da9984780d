package diff

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dropstream/dropstream/avail"
)

// step is one snapshot of a scenario: run i observes the venues in open
// (each a slot at 19:00), at t0+i minutes with run id "run-%04d", unless
// failed. stale expects the run not to be applied; want lists the
// transitions it emits (see describe).
type step struct {
	run    int
	open   []string
	failed bool
	k      int    // overrides the scenario's k when not 0
	id     string // overrides the run id
	stale  bool
	want   []string
}

type scenario struct {
	name  string
	k     int
	nfs   bool
	steps []step
}

var scenarios = []scenario{
	{name: "k2_baselineThenStable", k: 2, steps: []step{
		{run: 1, open: []string{"a", "b"}, want: []string{"open a raw baseline", "open b raw baseline"}},
		{run: 2, open: []string{"a", "b"}, want: []string{"open a stable baseline", "open b stable baseline"}},
		{run: 3, open: []string{"a"}, want: []string{"close b raw"}},
		{run: 4, open: []string{"a"}, want: []string{"close b stable notify"}},
		{run: 5, open: []string{"a", "c"}, want: []string{"open c raw"}},
		{run: 6, open: []string{"a", "c"}, want: []string{"open c stable notify"}},
		{run: 7, open: []string{"a", "c"}},
	}},
	{name: "k2_baselineNotifyFirstSight", k: 2, nfs: true, steps: []step{
		{run: 1, open: []string{"a"}, want: []string{"open a raw baseline"}},
		{run: 2, open: []string{"a", "b"}, want: []string{"open a stable baseline notify", "open b raw"}},
		{run: 3, open: []string{"a", "b"}, want: []string{"open b stable notify"}},
	}},
	{name: "k0_meansTwo", k: 0, steps: []step{
		{run: 1, open: []string{"a"}, want: []string{"open a raw baseline"}},
		{run: 2, open: []string{"a"}, want: []string{"open a stable baseline"}},
	}},
	{name: "k1_oneEventPerFlip", k: 1, steps: []step{
		{run: 1, open: []string{"a"}, want: []string{"open a raw+stable baseline"}},
		{run: 2, open: []string{"a", "b"}, want: []string{"open b raw+stable notify"}},
		{run: 3, open: []string{"b"}, want: []string{"close a raw+stable notify"}},
	}},
	{name: "k1_baselineNotifyFirstSight", k: 1, nfs: true, steps: []step{
		{run: 1, open: []string{"a"}, want: []string{"open a raw+stable baseline notify"}},
	}},
	{name: "k3_needsThreeRuns", k: 3, steps: []step{
		{run: 1},
		{run: 2, open: []string{"a"}, want: []string{"open a raw"}},
		{run: 3, open: []string{"a"}},
		{run: 4, open: []string{"a"}, want: []string{"open a stable notify"}},
		{run: 5, want: []string{"close a raw"}},
		{run: 6},
		{run: 7, want: []string{"close a stable notify"}},
	}},
	{name: "flapping_stableOpenNotifiesNobody", k: 2, steps: []step{
		{run: 1, open: []string{"a"}, want: []string{"open a raw baseline"}},
		{run: 2, open: []string{"a"}, want: []string{"open a stable baseline"}},
		{run: 3, want: []string{"close a raw"}},
		{run: 4, open: []string{"a"}, want: []string{"open a raw"}},
		{run: 5, open: []string{"a"}},
		{run: 6, want: []string{"close a raw"}},
		{run: 7, want: []string{"close a stable notify"}},
	}},
	{name: "flapping_newEntityNotifiesNobody", k: 2, steps: []step{
		{run: 1},
		{run: 2, open: []string{"a"}, want: []string{"open a raw"}},
		{run: 3, want: []string{"close a raw"}},
		{run: 4},
		{run: 5, open: []string{"a"}, want: []string{"open a raw"}},
		{run: 6, open: []string{"a"}, want: []string{"open a stable notify"}},
	}},
	{name: "flapping_baselineOpenNeverConfirmed", k: 2, nfs: true, steps: []step{
		{run: 1, open: []string{"a"}, want: []string{"open a raw baseline"}},
		{run: 2, want: []string{"close a raw"}},
		{run: 3},
	}},
	{name: "failedRuns_neitherCountNorBreak", k: 3, steps: []step{
		{run: 1},
		{run: 2, open: []string{"a"}, want: []string{"open a raw"}},
		{run: 3, failed: true},
		{run: 4, open: []string{"a"}},
		{run: 5, failed: true},
		{run: 6, open: []string{"a"}, want: []string{"open a stable notify"}},
		{run: 7, failed: true},
		{run: 8, want: []string{"close a raw"}},
	}},
	{name: "failedRun_firstOKRunIsBaseline", k: 2, steps: []step{
		{run: 1, failed: true},
		{run: 2, open: []string{"a"}, want: []string{"open a raw baseline"}},
	}},
	{name: "failedRun_doesNotCloseEverything", k: 1, steps: []step{
		{run: 1, open: []string{"a", "b"}, want: []string{"open a raw+stable baseline", "open b raw+stable baseline"}},
		{run: 2, failed: true},
		{run: 3, open: []string{"a", "b"}},
	}},
	{name: "replay_changesNothing", k: 2, steps: []step{
		{run: 1, open: []string{"a"}, want: []string{"open a raw baseline"}},
		{run: 1, open: []string{"a"}, stale: true},
		{run: 2, open: []string{"a"}, want: []string{"open a stable baseline"}},
		{run: 2, open: []string{"a"}, stale: true},
		{run: 3, failed: true},
		{run: 3, failed: true, stale: true},
	}},
	{name: "lateRun_ignored", k: 2, steps: []step{
		{run: 1, open: []string{"a"}, want: []string{"open a raw baseline"}},
		{run: 3, open: []string{"a", "b"}, want: []string{"open a stable baseline", "open b raw"}},
		{run: 2, stale: true},
		{run: 4, open: []string{"a", "b"}, want: []string{"open b stable notify"}},
	}},
	{name: "lateRun_olderThanFailedRunIgnored", k: 1, steps: []step{
		{run: 1, open: []string{"a"}, want: []string{"open a raw+stable baseline"}},
		{run: 3, failed: true},
		{run: 2, stale: true},
		{run: 4, want: []string{"close a raw+stable notify"}},
	}},
	{name: "sameMillisecond_runIDDecides", k: 1, steps: []step{
		{run: 1, id: "run-b", open: []string{"a"}, want: []string{"open a raw+stable baseline"}},
		{run: 1, id: "run-a", stale: true},
		{run: 1, id: "run-c", want: []string{"close a raw+stable notify"}},
		{run: 1, id: "run-bz", open: []string{"a"}, stale: true},
	}},
	{name: "kChange_pendingConfirmedUnderNewK", k: 3, steps: []step{
		{run: 1},
		{run: 2, open: []string{"a"}, want: []string{"open a raw"}},
		{run: 3, k: 1, open: []string{"a", "b"}, want: []string{"open a stable notify", "open b raw+stable notify"}},
	}},
	{name: "kChange_flipBackUnderK1IsRawOnly", k: 2, steps: []step{
		{run: 1, open: []string{"a"}, want: []string{"open a raw baseline"}},
		{run: 2, open: []string{"a"}, want: []string{"open a stable baseline"}},
		{run: 3, want: []string{"close a raw"}},
		{run: 4, k: 1, open: []string{"a"}, want: []string{"open a raw"}},
	}},
}

// snapshot builds the step's snapshot for scope.
func (s step) snapshot(sc scenario, scope string) avail.Snapshot {
	var ents []avail.Entity
	for _, v := range s.open {
		ents = append(ents, slot(v, "19:00"))
	}
	k := sc.k
	if s.k != 0 {
		k = s.k
	}
	snap := snapOf(scope, s.run, k, ents...)
	snap.NotifyFirstSight = sc.nfs
	if s.id != "" {
		snap.RunID = s.id
	}
	if s.failed {
		snap.OK, snap.Error, snap.Entities = false, fmt.Sprintf("HTTP 503 at run %d", s.run), nil
	}
	return snap
}

// applyFunc applies one snapshot and returns its result and transitions.
type applyFunc func(t *testing.T, snap avail.Snapshot) (Result, []Transition)

// runScenario plays sc through apply and checks every step.
func runScenario(t *testing.T, sc scenario, scope string, apply applyFunc) {
	t.Helper()
	for i, s := range sc.steps {
		snap := s.snapshot(sc, scope)
		res, got := apply(t, snap)
		if res.Applied == s.stale {
			t.Errorf("step %d (%s): applied %v, want %v", i, snap.RunID, res.Applied, !s.stale)
		}
		want := append([]string{}, s.want...)
		slices.Sort(want)
		if g := describeAll(got); !slices.Equal(g, want) {
			t.Errorf("step %d (%s): transitions\n got %q\nwant %q", i, snap.RunID, g, s.want)
		}
		var opened, closed int
		for _, tr := range got {
			if tr.Raw && tr.Kind == avail.KindOpen {
				opened++
			}
			if tr.Raw && tr.Kind == avail.KindClose {
				closed++
			}
		}
		if res.Opened != opened || res.Closed != closed {
			t.Errorf("step %d: result %+v disagrees with transitions (%d raw opens, %d raw closes)", i, res, opened, closed)
		}
	}
}

// TestModel_scenarios checks the reference model against the hand-written
// scenarios: flapping, late runs, replays, failed runs, baseline with and
// without notify-first-sight, k = 1, 2, 3.
func TestModel_scenarios(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			m := NewModel()
			runScenario(t, sc, "scope-1", func(t *testing.T, snap avail.Snapshot) (Result, []Transition) {
				res, ts, rec := m.Apply(snap, testTraceID)
				if rec.Applied != res.Applied {
					t.Errorf("run record applied %v, result %v", rec.Applied, res.Applied)
				}
				return res, ts
			})
		})
	}
}

// TestModel_lastSeen checks that closes carry the run_at of the last OK run
// that saw the entity open, also when confirmed later and across failures.
func TestModel_lastSeen(t *testing.T) {
	m := NewModel()
	a := slot("a", "19:00")
	m.Apply(snapOf("s", 1, 2, a), "")
	m.Apply(snapOf("s", 2, 2, a), "")
	failed := snapOf("s", 3, 2)
	failed.OK = false
	m.Apply(failed, "")
	_, raw, _ := m.Apply(snapOf("s", 4, 2), "")
	_, stable, _ := m.Apply(snapOf("s", 5, 2), "")
	want := t0.Add(2 * time.Minute)
	if len(raw) != 1 || !raw[0].LastSeen.Equal(want) {
		t.Fatalf("raw close %+v, want last seen %v", raw, want)
	}
	if len(stable) != 1 || !stable[0].Stable || !stable[0].LastSeen.Equal(want) {
		t.Fatalf("stable close %+v, want last seen %v", stable, want)
	}
	if st := m.State("s"); len(st.Open) != 0 || len(st.Pending) != 0 || !st.LastOKRunAt.Equal(t0.Add(5*time.Minute)) {
		t.Fatalf("final state %+v", st)
	}
}
