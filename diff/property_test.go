package diff

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/avail"
)

// genSnapshots returns n random snapshots over the given scopes, in feeding
// order: run_at mostly moving forward but often on the same millisecond
// (random run ids decide) and sometimes late, exact replays of earlier
// snapshots, failed runs, duplicate entity keys, entities that come and go
// (so flaps and stabilization happen), k in 0..3 changing now and then,
// and notify-first-sight per scope.
func genSnapshots(r *rand.Rand, scopes []string, n int) []avail.Snapshot {
	type scopeGen struct {
		universe []avail.Entity
		present  []bool
		k        int
		nfs      bool
		clock    time.Duration
	}
	gens := make([]*scopeGen, len(scopes))
	for i := range gens {
		g := &scopeGen{k: r.IntN(4), nfs: r.IntN(2) == 0}
		for v := range 5 {
			g.universe = append(g.universe, slot("v"+strconv.Itoa(v), "19:00"))
		}
		g.universe = append(g.universe,
			avail.Entity{Key: avail.RestaurantKey("ot", "r9", "2025-07-04", 3), Kind: avail.EntityRestaurant, Provider: "ot", Venue: "r9"},
			avail.Entity{Key: avail.SourceKey("src-" + strconv.Itoa(i)), Kind: avail.EntitySource})
		g.present = make([]bool, len(g.universe))
		gens[i] = g
	}
	var out []avail.Snapshot
	for seq := 0; len(out) < n; seq++ {
		if len(out) > 0 && r.IntN(5) == 0 {
			out = append(out, out[r.IntN(len(out))]) // exact replay
			continue
		}
		si := r.IntN(len(scopes))
		g := gens[si]
		if r.IntN(10) == 0 {
			g.k = r.IntN(4)
		}
		// Mostly forward in time, sometimes on the same millisecond (the
		// run id decides), sometimes late.
		g.clock += time.Duration(r.IntN(3)) * time.Second
		at := g.clock + time.Duration(r.IntN(3))*time.Microsecond
		if r.IntN(6) == 0 {
			at -= time.Duration(r.IntN(5)) * time.Second
		}
		snap := avail.Snapshot{
			RunID:    fmt.Sprintf("%04x-%d", r.IntN(1<<16), seq), // unique, random order
			SourceID: "src-" + strconv.Itoa(si), Provider: "resy", ScopeKey: scopes[si],
			RunAt:            t0.Add(at),
			OK:               r.IntN(5) != 0,
			Stabilization:    g.k,
			NotifyFirstSight: g.nfs,
		}
		snap.StartedAt = snap.RunAt.Add(-time.Second)
		if !snap.OK {
			snap.Error = "timeout"
			out = append(out, snap)
			continue
		}
		for i, e := range g.universe {
			if r.IntN(4) == 0 {
				g.present[i] = !g.present[i]
			}
			if g.present[i] {
				e.Attrs = map[string]string{"seq": strconv.Itoa(seq)} // entities change between runs
				snap.Entities = append(snap.Entities, e)
			}
		}
		if len(snap.Entities) > 0 && r.IntN(10) == 0 {
			dup := snap.Entities[0]
			dup.VenueName = "duplicate, ignored"
			snap.Entities = append(snap.Entities, dup)
		}
		out = append(out, snap)
	}
	return out
}

// testMatchesModel feeds random sequences to the script and the model and
// requires identical results, transitions (by event id and every field),
// run records and final states.
func testMatchesModel(t *testing.T, rdb redis.UniversalClient) {
	const seeds, perSeed = 25, 80
	topics := avail.NewTopics(4)
	var cov coverage
	defer cov.check(t)
	for seed := range uint64(seeds) {
		r := rand.New(rand.NewPCG(seed, 0xd1ff))
		scopes := []string{fmt.Sprintf("s%d-a", seed), fmt.Sprintf("s%d-b", seed), fmt.Sprintf("s%d-c", seed)}
		snaps := genSnapshots(r, scopes, perSeed)
		m := NewModel()
		var want []Transition
		wantRuns := map[string][]avail.RunRecord{}
		for i, snap := range snaps {
			res, err := Apply(context.Background(), rdb, topics, snap, testTraceParent)
			if err != nil {
				t.Fatalf("seed %d snapshot %d: %v", seed, i, err)
			}
			wres, ts, rec := m.Apply(snap, testTraceID)
			cov.add(snap, wres, ts)
			if res != wres {
				t.Fatalf("seed %d snapshot %d (%s of %s): result %+v, model %+v", seed, i, snap.RunID, snap.ScopeKey, res, wres)
			}
			want = append(want, ts...)
			wantRuns[snap.ScopeKey] = append(wantRuns[snap.ScopeKey], rec)
		}
		compareAll(t, fmt.Sprintf("seed %d", seed), rdb, topics, m, scopes, want, wantRuns)
		if t.Failed() {
			t.Fatalf("seed %d failed; snapshots: %+v", seed, snaps)
		}
	}
}

// testBatchMatchesModel is testMatchesModel through ApplyBatch, in batches
// of random sizes that often hold several snapshots of one scope.
func testBatchMatchesModel(t *testing.T, rdb redis.UniversalClient) {
	const seeds, perSeed = 10, 120
	topics := avail.NewTopics(2)
	for seed := range uint64(seeds) {
		r := rand.New(rand.NewPCG(seed, 0xba7c))
		scopes := []string{fmt.Sprintf("b%d-a", seed), fmt.Sprintf("b%d-b", seed)}
		snaps := genSnapshots(r, scopes, perSeed)
		m := NewModel()
		var want []Transition
		wantRuns := map[string][]avail.RunRecord{}
		for len(snaps) > 0 {
			n := min(len(snaps), 1+r.IntN(16))
			batch := make([]Input, n)
			for i := range batch {
				batch[i] = Input{Snapshot: snaps[i], TraceParent: testTraceParent}
			}
			res, err := ApplyBatch(context.Background(), rdb, topics, batch)
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			for i, in := range batch {
				wres, ts, rec := m.Apply(in.Snapshot, testTraceID)
				if res[i] != wres {
					t.Fatalf("seed %d: batch result %d %+v, model %+v", seed, i, res[i], wres)
				}
				want = append(want, ts...)
				wantRuns[in.Snapshot.ScopeKey] = append(wantRuns[in.Snapshot.ScopeKey], rec)
			}
			snaps = snaps[n:]
		}
		compareAll(t, fmt.Sprintf("batch seed %d", seed), rdb, topics, m, scopes, want, wantRuns)
	}
}

// compareAll checks the streams and states of scopes against the model's.
func compareAll(t *testing.T, what string, rdb redis.UniversalClient, topics avail.Topics, m *Model,
	scopes []string, want []Transition, wantRuns map[string][]avail.RunRecord) {
	t.Helper()
	var got []Transition
	for _, s := range scopes {
		got = append(got, transitionsOf(t, rdb, topics, s)...)
		runs := runsOf(t, rdb, topics, s)
		if len(runs) != len(wantRuns[s]) {
			t.Errorf("%s: scope %s: %d run records, want %d", what, s, len(runs), len(wantRuns[s]))
			continue
		}
		wantSorted := sortRuns(slices.Clone(wantRuns[s]))
		for i := range runs {
			if g, w := normRun(runs[i]), normRun(wantSorted[i]); !reflect.DeepEqual(g, w) {
				t.Errorf("%s: scope %s run record %d:\n got %+v\nwant %+v", what, s, i, g, w)
			}
		}
		checkState(t, rdb, topics, m, s)
	}
	sameTransitions(t, what, got, want)
	ids := make([]string, 0, len(got))
	for _, tr := range got {
		ids = append(ids, tr.EventID)
	}
	slices.Sort(ids)
	if len(slices.Compact(ids)) != len(got) {
		t.Errorf("%s: duplicate event ids among %d transitions", what, len(got))
	}
}

// coverage counts what random sequences exercised, so the property test
// cannot silently stop covering a behaviour.
type coverage struct {
	stale, failed, rawOnly, stableOnly, rawStable, baseline, notify, flapBack int
}

func (c *coverage) add(snap avail.Snapshot, res Result, ts []Transition) {
	if !res.Applied {
		c.stale++
	}
	if !snap.OK {
		c.failed++
	}
	for _, tr := range ts {
		switch {
		case tr.Raw && tr.Stable:
			c.rawStable++
		case tr.Stable:
			c.stableOnly++
		default:
			c.rawOnly++
		}
		if tr.Baseline {
			c.baseline++
		}
		if tr.Notify {
			c.notify++
		}
	}
	if res.Opened+res.Closed > res.StableOpened+res.StableClosed && stabilization(snap) == 1 {
		c.flapBack++ // a raw-only flip under k = 1: back to the stable state
	}
}

func (c *coverage) check(t *testing.T) {
	t.Helper()
	t.Logf("coverage: %+v", *c)
	for name, n := range map[string]int{"stale runs": c.stale, "failed runs": c.failed, "raw-only": c.rawOnly,
		"stable-only": c.stableOnly, "raw+stable": c.rawStable, "baseline": c.baseline, "notify": c.notify,
		"flip back under k=1": c.flapBack} {
		if n == 0 {
			t.Errorf("random sequences never produced %s", name)
		}
	}
}
