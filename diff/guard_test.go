package diff

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/avail"
)

// testGuardMatchesModel is testMatchesModel with a guard that holds often
// (more than 2 closes and more than half of the open entities): the script
// and the model agree on every result, transition, run record (held ones
// included) and state.
func testGuardMatchesModel(t *testing.T, rdb redis.UniversalClient) {
	const seeds, perSeed = 15, 80
	topics := avail.NewTopics(4)
	guard := Guard{Min: 2, Share: 0.5}
	held := 0
	for seed := range uint64(seeds) {
		r := rand.New(rand.NewPCG(seed, 0x9a7d))
		scopes := []string{fmt.Sprintf("g%d-a", seed), fmt.Sprintf("g%d-b", seed)}
		snaps := genSnapshots(r, scopes, perSeed)
		m := NewModel()
		m.Guard = guard
		var want []Transition
		wantRuns := map[string][]avail.RunRecord{}
		for i, snap := range snaps {
			res, err := applyBatch(context.Background(), rdb, topics, []Input{{Snapshot: snap, TraceParent: testTraceParent, Guard: &guard}}, false)
			if err != nil {
				t.Fatalf("seed %d snapshot %d: %v", seed, i, err)
			}
			wres, ts, rec := m.Apply(snap, testTraceID)
			if res[0] != wres {
				t.Fatalf("seed %d snapshot %d (%s of %s): result %+v, model %+v", seed, i, snap.RunID, snap.ScopeKey, res[0], wres)
			}
			if wres.Held {
				held++
			}
			want = append(want, ts...)
			wantRuns[snap.ScopeKey] = append(wantRuns[snap.ScopeKey], rec)
		}
		compareAll(t, fmt.Sprintf("seed %d", seed), rdb, topics, m, scopes, want, wantRuns)
		if t.Failed() {
			t.Fatalf("seed %d failed; snapshots: %+v", seed, snaps)
		}
	}
	if held == 0 {
		t.Error("no run held: the sequences never reached the guard")
	}
}

// TestGuard_blankPageBetweenTwoFullOnesIsHeardByNoWatcher: a scope with 50
// open slots, then a run answering none (a blank page read as an empty
// one), then the 50 slots again: the blank run is held and no transition
// is emitted at all; a second blank run in a row confirms the closes.
func TestGuard_blankPageBetweenTwoFullOnesIsHeardByNoWatcher(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			rdb := b.client(t)
			topics := avail.NewTopics(2)
			const scope = "resy|v1|2025-07-04|2"
			guard := DefaultGuard
			slots := make([]avail.Entity, 50)
			for i := range slots {
				slots[i] = slot("v1", fmt.Sprintf("%02d:%02d", 10+i/4, 15*(i%4)))
			}
			apply := func(i int, ents ...avail.Entity) Result {
				t.Helper()
				snap := snapOf(scope, i, 1, ents...)
				snap.NotifyFirstSight = true
				res, err := applyBatch(ctx, rdb, topics, []Input{{Snapshot: snap, Guard: &guard}}, false)
				if err != nil {
					t.Fatal(err)
				}
				return res[0]
			}
			if res := apply(1, slots...); !res.Applied || res.StableOpened != 50 {
				t.Fatalf("first run %+v, want 50 openings", res)
			}
			before := len(transitionsOf(t, rdb, topics, scope))
			if res := apply(2); !res.Held || res.Applied {
				t.Fatalf("blank run %+v, want it held", res)
			}
			if res := apply(3, slots...); !res.Applied || res.Opened+res.Closed+res.StableOpened+res.StableClosed != 0 {
				t.Fatalf("run after the blank one %+v, want applied with no flip", res)
			}
			if n := len(transitionsOf(t, rdb, topics, scope)) - before; n != 0 {
				t.Errorf("%d transitions after the first run, want none: a watcher would have heard of a false close", n)
			}
			var held int
			for _, r := range runsOf(t, rdb, topics, scope) {
				if r.Status == "held" {
					held++
					if r.RunID != "run-0002" || r.Applied || r.Closed != 50 {
						t.Errorf("held run record %+v, want run-0002, not applied, 50 closes held", r)
					}
				}
			}
			if held != 1 {
				t.Errorf("%d held run records, want 1", held)
			}
			// Two blank runs in a row: the second confirms the closes.
			if res := apply(4); !res.Held {
				t.Fatalf("first blank run %+v, want it held", res)
			}
			if res := apply(5); !res.Applied || res.StableClosed != 50 {
				t.Fatalf("second blank run %+v, want the 50 closes applied", res)
			}
			st, err := ReadState(ctx, rdb, topics, scope)
			if err != nil || len(st.Open) != 0 || st.HeldRunID != "" {
				t.Errorf("state %+v, %v; want nothing open and no run held", st, err)
			}
		})
	}
}
