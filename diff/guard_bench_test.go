package diff

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/internal/testenv"
)

// BenchmarkGuard_blankPageScenario counts the false notices the
// false-close guard avoids. Twenty venues' scopes of 50 open slots each are
// polled 60 times; nothing ever changes, but each run is, with
// probability 5 % (a fixed seed), a blank page: a 200 with no slots, as a
// provider's bot block or an empty render answers. Every stable
// transition after the first run is then a false notice a watcher would
// hear once the slots are stable (a "gone" at the blank run, an "open"
// at the next). It reports,
// per scenario, false-notices and held-runs, with the guard off and on
// (DefaultGuard), at stabilization k=1 and k=2.
//
//	scripts/testenv.sh sh -c 'go test -run X -bench Guard_blankPageScenario -benchtime 1x ./diff/'
func BenchmarkGuard_blankPageScenario(b *testing.B) {
	const scopes, slots, runs, blankShare = 20, 50, 60, 0.05
	for _, tc := range []struct {
		name  string
		guard *Guard
		k     int
	}{
		{"guard=off/k=1", nil, 1}, {"guard=on/k=1", &DefaultGuard, 1},
		{"guard=off/k=2", nil, 2}, {"guard=on/k=2", &DefaultGuard, 2},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			rdb := testenv.Dial(b, testenv.RedisURL(b))
			topics := avail.NewTopics(2)
			var falseNotices, held int
			for n := 0; n < b.N; n++ {
				rng := rand.New(rand.NewPCG(7, 11))
				for s := range scopes {
					scope := fmt.Sprintf("resy|v%d-%d-%s|2025-07-04|2", s, n, b.Name())
					ents := make([]avail.Entity, slots)
					for i := range ents {
						ents[i] = slot(fmt.Sprintf("v%d", s), fmt.Sprintf("%02d:%02d", 10+i/4, 15*(i%4)))
					}
					for r := 1; r <= runs; r++ {
						run := ents
						// The first k runs are full: the slots become stable open.
						if r > tc.k && rng.Float64() < blankShare {
							run = nil
						}
						snap := snapOf(scope, r, tc.k, run...)
						res, err := applyBatch(ctx, rdb, topics, []Input{{Snapshot: snap, Guard: tc.guard}}, false)
						if err != nil {
							b.Fatal(err)
						}
						if res[0].Held {
							held++
						}
						if r > tc.k {
							falseNotices += res[0].StableOpened + res[0].StableClosed
						}
					}
				}
			}
			b.ReportMetric(float64(falseNotices)/float64(b.N), "false-notices")
			b.ReportMetric(float64(held)/float64(b.N), "held-runs")
		})
	}
}
