package diff

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/avail"
)

// genVenueSnapshots returns n random snapshots of one scope whose venues
// flap at different rates: venue "v<i>" toggles each of its slots with
// probability i/10 per run (v0 never after its first open, v5 half the
// time), with failed runs, exact replays, late runs and the snapshot's k
// changing now and then, as genSnapshots.
func genVenueSnapshots(r *rand.Rand, scope string, n int) []avail.Snapshot {
	var universe []avail.Entity
	var rate []int
	for v := range 6 {
		for _, hhmm := range []string{"19:00", "20:00"} {
			universe = append(universe, slot("v"+strconv.Itoa(v), hhmm))
			rate = append(rate, v)
		}
	}
	present := make([]bool, len(universe))
	k := r.IntN(4)
	var clock time.Duration
	var out []avail.Snapshot
	for seq := 0; len(out) < n; seq++ {
		if len(out) > 0 && r.IntN(8) == 0 {
			out = append(out, out[r.IntN(len(out))])
			continue
		}
		if r.IntN(15) == 0 {
			k = r.IntN(4)
		}
		clock += time.Duration(1+r.IntN(2)) * time.Second
		at := clock
		if r.IntN(10) == 0 {
			at -= time.Duration(r.IntN(4)) * time.Second
		}
		snap := avail.Snapshot{RunID: fmt.Sprintf("%04x-%d", r.IntN(1<<16), seq), SourceID: "src-1", Provider: "resy",
			ScopeKey: scope, RunAt: t0.Add(at), StartedAt: t0.Add(at - time.Second), OK: r.IntN(8) != 0, Stabilization: k}
		if !snap.OK {
			snap.Error = "timeout"
			out = append(out, snap)
			continue
		}
		for i, e := range universe {
			if !present[i] && (rate[i] == 0 && r.IntN(4) == 0 || r.IntN(10) < rate[i]) || present[i] && r.IntN(10) < rate[i] {
				present[i] = !present[i]
			}
			if present[i] {
				snap.Entities = append(snap.Entities, e)
			}
		}
		out = append(out, snap)
	}
	return out
}

// testPerVenueMatchesModel: with per-venue stabilization on, the script and
// the model agree on every result (the venues' k included), transition,
// run record and state (the flap records included), applied one by one
// and in batches; and the venues' measured flap rates spread their k over
// the whole range 1..MaxK.
func testPerVenueMatchesModel(t *testing.T, rdb redis.UniversalClient) {
	const seeds, perSeed, maxK = 12, 120, 4
	topics := avail.NewTopics(2)
	var byK [MaxStabilization]int
	for seed := range uint64(seeds) {
		r := rand.New(rand.NewPCG(seed, 0x7e4e))
		scope := fmt.Sprintf("pv%d", seed)
		snaps := genVenueSnapshots(r, scope, perSeed)
		m := NewModel()
		m.PerVenueMaxK = maxK
		var want []Transition
		wantRuns := map[string][]avail.RunRecord{}
		for len(snaps) > 0 {
			n := min(len(snaps), 1+r.IntN(4))
			batch := make([]Input, n)
			for i := range batch {
				batch[i] = Input{Snapshot: snaps[i], TraceParent: testTraceParent, PerVenueMaxK: maxK}
			}
			res, err := ApplyBatch(context.Background(), rdb, topics, batch)
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			for i, in := range batch {
				wres, ts, rec := m.Apply(in.Snapshot, testTraceID)
				if res[i] != wres {
					t.Fatalf("seed %d run %s: result %+v, model %+v", seed, in.Snapshot.RunID, res[i], wres)
				}
				for j, c := range wres.VenueK {
					byK[j] += c
				}
				want = append(want, ts...)
				wantRuns[scope] = append(wantRuns[scope], rec)
			}
			snaps = snaps[n:]
		}
		compareAll(t, fmt.Sprintf("seed %d", seed), rdb, topics, m, []string{scope}, want, wantRuns)
		if t.Failed() {
			t.Fatalf("seed %d failed", seed)
		}
	}
	t.Logf("venues by k: %v", byK)
	for k := 1; k <= maxK; k++ {
		if byK[k-1] == 0 {
			t.Errorf("no venue ever got k=%d: %v", k, byK)
		}
	}
}

// TestPerVenueStabilization_flappyVenueGetsLargerKSteadyOneK1: one scope,
// two venues, the snapshot's k 2 (and 1). Venue "steady" gains a slot each
// run that stays open; venue "flappy" shows a slot every other run. After
// ten runs (and four quiet ones) the flap records give steady k=1 and flappy MaxK=4. Then a new
// steady slot notifies on the run that first shows it; flappy blips of one
// and of three runs produce no stable transition, and a flappy slot that
// holds for four runs does. With the option off the same runs keep the
// snapshot's k for both.
func TestPerVenueStabilization_flappyVenueGetsLargerKSteadyOneK1(t *testing.T) {
	type stable struct{ key, kind string }
	for _, b := range backends() {
		for _, tc := range []struct {
			name string
			k    int
			maxK int
		}{{"k2", 2, 4}, {"k1", 1, 4}, {"k2-off", 2, 0}} {
			t.Run(b.name+"/"+tc.name, func(t *testing.T) {
				rdb := b.client(t)
				topics := avail.NewTopics(2)
				scope := "pv-" + tc.name
				m := NewModel()
				m.PerVenueMaxK = tc.maxK
				run := 0
				apply := func(ents ...avail.Entity) (Result, []stable) {
					t.Helper()
					run++
					snap := snapOf(scope, run, tc.k, ents...)
					res, err := ApplyBatch(context.Background(), rdb, topics, []Input{{Snapshot: snap, PerVenueMaxK: tc.maxK}})
					if err != nil {
						t.Fatal(err)
					}
					wres, _, _ := m.Apply(snap, "")
					if res[0] != wres {
						t.Fatalf("run %d: result %+v, model %+v", run, res[0], wres)
					}
					var out []stable
					for _, tr := range transitionsOf(t, rdb, topics, scope) {
						if tr.RunID == snap.RunID && tr.Stable && tr.Notify {
							out = append(out, stable{tr.Entity.Key, tr.Kind})
						}
					}
					return res[0], out
				}
				blip := slot("flappy", "21:00")
				var steady []avail.Entity
				for i := range 10 {
					steady = append(steady, slot("steady", fmt.Sprintf("1%d:00", i)))
					ents := append([]avail.Entity{}, steady...)
					if i%2 == 0 {
						ents = append(ents, blip)
					}
					apply(ents...)
				}
				// Quiet runs: a close left pending (under k=1 the last blip
				// closed when flappy's k was already 4) confirms.
				quiet := func() {
					for range 4 {
						apply(steady...)
					}
				}
				quiet()
				st, err := ReadState(context.Background(), rdb, topics, scope)
				if err != nil {
					t.Fatal(err)
				}
				checkState(t, rdb, topics, m, scope)
				wantSteadyK, wantFlappyK := tc.k, tc.k
				if tc.maxK > 0 {
					if c := st.Flaps["steady"]; c.Flaps != 0 || c.Opens < MinFlapOpens {
						t.Errorf("steady venue's flap record %+v, want opens ≥ %d and no flap", c, MinFlapOpens)
					}
					if c := st.Flaps["flappy"]; c.Opens != 5 || c.Flaps != 5 {
						t.Errorf("flappy venue's flap record %+v, want 5 opens, 5 flaps", c)
					}
					wantSteadyK, wantFlappyK = 1, tc.maxK
				} else if st.Flaps != nil {
					t.Errorf("flap records %+v kept with the option off", st.Flaps)
				}

				// A new steady slot: notified after one run under k=1.
				fresh := slot("steady", "23:00")
				steady = append(steady, fresh)
				res, got := apply(steady...)
				if tc.maxK > 0 {
					var wantK [MaxStabilization]int
					wantK[0] = 1 // only steady was looked at: flappy has nothing open or pending
					if res.VenueK != wantK {
						t.Errorf("venues by k %v, want %v", res.VenueK, wantK)
					}
				}
				if n := countOf(got, fresh.Key); (n == 1) != (wantSteadyK == 1) {
					t.Errorf("steady venue's new slot: stable opens on its first run %v; want one iff k=1 (k=%d)", got, wantSteadyK)
				}
				apply(steady...) // k=2 confirms it here
				// Flappy blips: one run, then three runs.
				var blipStable []stable
				for _, present := range []bool{true, false, true, true, true, false} {
					ents := append([]avail.Entity{}, steady...)
					if present {
						ents = append(ents, blip)
					}
					_, got := apply(ents...)
					blipStable = append(blipStable, filterKey(got, blip.Key)...)
				}
				if wantFlappyK > 3 && len(blipStable) != 0 {
					t.Errorf("flappy venue's blips of 1 and 3 runs under k=%d: stable %v, want none", wantFlappyK, blipStable)
				}
				if wantFlappyK <= 2 && len(blipStable) == 0 {
					t.Errorf("flappy venue's blips under k=%d: no stable transition, want some", wantFlappyK)
				}
				quiet()
				// A flappy slot that holds for MaxK runs opens stably.
				var held []stable
				for range 4 {
					_, got := apply(append(append([]avail.Entity{}, steady...), blip)...)
					held = append(held, filterKey(got, blip.Key)...)
				}
				if len(held) != 1 || held[0].kind != avail.KindOpen {
					t.Errorf("flappy slot held for 4 runs: stable %v, want one open", held)
				}
				checkState(t, rdb, topics, m, scope)
			})
		}
	}
}

func countOf[T interface{ ~struct{ key, kind string } }](xs []T, key string) int {
	n := 0
	for _, x := range xs {
		if struct{ key, kind string }(x).key == key {
			n++
		}
	}
	return n
}

func filterKey[T interface{ ~struct{ key, kind string } }](xs []T, key string) []T {
	var out []T
	for _, x := range xs {
		if struct{ key, kind string }(x).key == key {
			out = append(out, x)
		}
	}
	return out
}
