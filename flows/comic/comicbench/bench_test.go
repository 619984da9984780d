package comicbench

import (
	"context"
	"testing"

	"github.com/alicebob/miniredis/v2"

	"github.com/dropstream/dropstream/flows/comic"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// TestRun_smallBenchOfEachWorld runs a small bench of each world and checks
// that every figure is measured and that the matcher stage really matched
// every listed comic (its job is done) before its throughput was taken.
func TestRun_smallBenchOfEachWorld(t *testing.T) {
	for _, world := range Worlds {
		t.Run(world, func(t *testing.T) {
			ctx := context.Background()
			rdb := testenv.Dial(t, "redis://"+miniredis.RunT(t).Addr())
			cfg := Config{World: world, Subscriptions: 2000, Matches: 100, Intake: 40, Workers: 4, Partitions: 2}
			r, err := Run(ctx, rdb, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if r.Subscriptions < 1900 || r.ActivePattern < 5 || r.Lookup.P99 <= 0 || r.Job.P99 <= 0 || r.IntakePerSecond <= 0 ||
				r.MatcherPerSecond <= 0 || r.MeanMatched <= 0 {
				t.Errorf("result %+v: want every figure measured", r)
			}
			svc, err := comic.NewWith(rdb, comic.Config{Partitions: 2}, nil, stream.Telemetry{})
			if err != nil {
				t.Fatal(err)
			}
			listed := 0
			for p := range 2 {
				ids, err := rdb.ZRange(ctx, "ds:"+svc.Topics().Jobs.HashTag(p)+":comic:inventory", 0, -1).Result()
				if err != nil {
					t.Fatal(err)
				}
				for _, id := range ids {
					st, err := svc.Inventory.Status(ctx, id)
					if err != nil || !st.Done {
						t.Errorf("listed comic %s: status %+v, %v; want its job done", id, st, err)
					}
					listed++
				}
			}
			if listed != cfg.Intake {
				t.Errorf("%d comics listed, want %d", listed, cfg.Intake)
			}
			// A second run must reuse the same world or load into an empty
			// database.
			if _, err := Run(ctx, rdb, Config{World: world, Subscriptions: 10, Matches: 1, Intake: 1}); err == nil {
				t.Error("a second run over loaded subscriptions succeeded, want an error")
			}
			other := Worlds[0]
			if other == world {
				other = Worlds[1]
			}
			if _, err := Run(ctx, rdb, Config{World: other, Reuse: true, Matches: 1, Intake: 1}); err == nil {
				t.Errorf("a reuse of world %s over world %s succeeded, want an error", other, world)
			}
		})
	}
}
