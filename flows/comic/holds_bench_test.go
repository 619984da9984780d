package comic

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// BenchmarkHolds_Advance measures the hold hand-off on a redis-server of
// its own: b.N listed comics, each matched by 40 subscriptions and held
// for its first wave of 20, are past their holds; Advance tells each its
// second wave. An op is one wave told (one notify message of 20 ids):
// its time, CPU (client and Redis) and Redis round trips.
func BenchmarkHolds_Advance(b *testing.B) {
	rdb := testenv.Dial(b, testenv.StartRedis(b, testenv.RedisConfig{}).URL())
	rt := &roundTrips{}
	rdb.AddHook(rt)
	svc, err := NewWith(rdb, Config{Partitions: 2}, nil, stream.Telemetry{Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for i := range 40 {
		if _, err := svc.Subscriptions.Create(ctx, fmt.Sprintf("fan%d@example.com", i), []byte(`{"series":"Held"}`), ""); err != nil {
			b.Fatal(err)
		}
	}
	round := 0
	b.Run("wave=20", func(b *testing.B) {
		round++
		svc.Holds.now = time.Now
		for i := range b.N {
			l, _, err := svc.Inventory.Add(ctx, comicN("Held", round*1_000_000+i+1, "DC", false))
			if err != nil {
				b.Fatal(err)
			}
			job := Job{ComicID: l.ID, Gen: l.Gen, AddedAtMs: l.AddedAt.UnixMilli(), Comic: l.Comic.Canonical()}
			if n, err := svc.Matcher.Process(ctx, job); err != nil || n != 20 {
				b.Fatalf("Process = %d, %v; want the first wave of 20 told", n, err)
			}
		}
		// Every hold is over an hour later.
		later := time.Now().Add(time.Hour)
		svc.Holds.now = func() time.Time { return later }
		cost := startCost(ctx, rdb, rt)
		b.ResetTimer()
		for told := 0; told < b.N; {
			n, err := svc.Holds.Advance(ctx)
			if err != nil || n == 0 {
				b.Fatalf("Advance = %d, %v after %d of %d waves", n, err, told, b.N)
			}
			told += n
		}
		b.StopTimer()
		cost.report(ctx, b)
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "waves/s")
	})
}
