package offerbench

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

var quiet = stream.Telemetry{Logger: slog.New(slog.DiscardHandler)}

func TestRun_smallBenchCompletesEverySearch(t *testing.T) {
	rdb, err := stream.Dial(context.Background(), "redis://"+miniredis.RunT(t).Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	r, err := Run(context.Background(), rdb, Config{Offers: 500, Products: 30, Misses: 5, Hits: 20, Broad: 1, Partitions: 2, Telemetry: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if r.Miss.Count != 5 || r.Hit.Count != 20 || r.Broad.Count != 1 || r.Miss.Matches == 0 || r.Hit.Matches != r.Miss.Matches {
		t.Errorf("result %+v: want 5 misses, 20 hits, 1 broad, the hits matching as many offers as the misses", r)
	}
	if _, err := Run(context.Background(), rdb, Config{Offers: 10}); err == nil {
		t.Error("Run accepted a non-empty database")
	}
}

// TestRun_hitsOutliveASlowRun runs the bench on a clock that moves 30s at
// each reading: a run far longer than the flow's default result TTL (5m),
// as a full-size run on a slow machine. Every hit must still be a hit.
func TestRun_hitsOutliveASlowRun(t *testing.T) {
	rdb, err := stream.Dial(context.Background(), "redis://"+miniredis.RunT(t).Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	var ticks atomic.Int64
	start := time.Now()
	now := func() time.Time { return start.Add(time.Duration(ticks.Add(1)) * 30 * time.Second) }
	r, err := Run(context.Background(), rdb, Config{Offers: 300, Products: 30, Misses: 5, Hits: 20, Partitions: 2, Telemetry: quiet, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if r.Hit.Count != 20 || r.Hit.Matches != r.Miss.Matches {
		t.Errorf("result %+v: want 20 hits matching as many offers as the misses", r)
	}
	if elapsed := time.Duration(ticks.Load()) * 30 * time.Second; elapsed < 10*time.Minute {
		t.Errorf("the clock moved %s: want a run longer than the default result TTL", elapsed)
	}
}

// BenchmarkSearch runs the bench on the test Redis once per b.N loop and
// reports the p50/p99 of misses and hits. OFFERBENCH_OFFERS sets the
// offers (default 100,000).
func BenchmarkSearch(b *testing.B) {
	cfg := Config{Telemetry: quiet}
	if n, err := strconv.Atoi(os.Getenv("OFFERBENCH_OFFERS")); err == nil {
		cfg.Offers = n
	}
	for b.Loop() {
		rdb, err := stream.Dial(context.Background(), testenv.RedisURL(b))
		if err != nil {
			b.Fatal(err)
		}
		r, err := Run(context.Background(), rdb, cfg)
		_ = rdb.Close()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(r.Miss.P50.Microseconds())/1000, "miss-p50-ms")
		b.ReportMetric(float64(r.Miss.P99.Microseconds())/1000, "miss-p99-ms")
		b.ReportMetric(float64(r.Hit.P50.Microseconds())/1000, "hit-p50-ms")
		b.ReportMetric(float64(r.Hit.P99.Microseconds())/1000, "hit-p99-ms")
	}
}
