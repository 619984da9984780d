package availbench_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/dropstream/dropstream/flows/avail/availbench"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// benchScopes and benchPerScope are the small scale of the Go benchmarks:
// 100,000 entities.
const benchScopes, benchPerScope = 1000, 100

func quietTelemetry() stream.Telemetry {
	return stream.Telemetry{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

func dial(tb testing.TB, url string) redis.UniversalClient {
	tb.Helper()
	rdb, err := stream.Dial(context.Background(), url)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { rdb.Close() })
	return rdb
}

// open returns a bench over a Redis database of its own, baselined.
func open(b *testing.B, dsn string) *availbench.Harness {
	b.Helper()
	bench, err := availbench.Open(context.Background(), dial(b, testenv.RedisURL(b)), availbench.Config{
		ClickHouseDSN: dsn, Scopes: benchScopes, PerScope: benchPerScope, Telemetry: quietTelemetry()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := bench.Close(); err != nil {
			b.Error(err)
		}
	})
	if _, _, _, _, err := bench.Setup(context.Background()); err != nil {
		b.Fatal(err)
	}
	return bench
}

// BenchmarkDiffStage measures observations per second through the diff
// stage on a real redis-server: 1,000 scopes of 100 entities, 1% churn per
// run. One op is one snapshot of 100 entities; the snapshots are published
// first, and observations/s is the time the stage took to apply them.
func BenchmarkDiffStage(b *testing.B) {
	bench := open(b, "")
	b.ResetTimer()
	r, err := bench.DiffSnapshots(context.Background(), b.N)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(r.PerSecond(), "observations/s")
}

// BenchmarkAnalyticsStage measures transitions per second into ClickHouse:
// each op is one churn run of the 1,000 scopes through the diff stage
// (untimed), whose transitions the analytics stages then drain (timed).
func BenchmarkAnalyticsStage(b *testing.B) {
	bench := open(b, testenv.ClickHouseDSN(b))
	ctx := context.Background()
	var total availbench.Rate
	for range b.N {
		b.StopTimer()
		if _, err := bench.Diff(ctx, 1); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		r, err := bench.Analytics(ctx)
		if err != nil {
			b.Fatal(err)
		}
		total.Elapsed += r.Elapsed
		total.Count = r.Count // cumulative
	}
	b.ReportMetric(float64(total.Count)/max(total.Elapsed, time.Nanosecond).Seconds(), "transitions/s")
}
