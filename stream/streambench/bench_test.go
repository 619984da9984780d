package streambench_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/stream/streambench"
)

type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

func telemetry(b *testing.B, on bool) stream.Telemetry {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	if !on {
		return stream.Telemetry{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: noop.NewMeterProvider(), Logger: quiet}
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })
	return stream.Telemetry{TracerProvider: tp, MeterProvider: mp, Propagator: propagation.TraceContext{}, Logger: quiet}
}

// BenchmarkStage_throughput consumes b.N pre-published messages with one
// stage copy and a trivial handler on a real redis-server.
func BenchmarkStage_throughput(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "telemetry=off"
		if on {
			name = "telemetry=on"
		}
		b.Run(name, func(b *testing.B) {
			rdb, err := stream.Dial(context.Background(), testenv.RedisURL(b))
			if err != nil {
				b.Fatal(err)
			}
			defer rdb.Close()
			cfg := streambench.Config{Messages: max(b.N, 1000), Partitions: 4, Telemetry: telemetry(b, on)}
			b.ResetTimer()
			res, err := streambench.Throughput(context.Background(), rdb, cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(res.PerSecond, "msg/s")
		})
	}
}

// BenchmarkStage_latency publishes at 10k msg/s for 3s and reports per-hop
// latency quantiles.
func BenchmarkStage_latency(b *testing.B) {
	rdb, err := stream.Dial(context.Background(), testenv.RedisURL(b))
	if err != nil {
		b.Fatal(err)
	}
	defer rdb.Close()
	for i := 0; i < b.N; i++ {
		res, err := streambench.Latency(context.Background(), rdb, streambench.Config{
			Rate: 10000, Duration: 3 * time.Second, Partitions: 4, Telemetry: telemetry(b, true)})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(res.P50.Microseconds()), "p50-µs")
		b.ReportMetric(float64(res.P99.Microseconds()), "p99-µs")
	}
}
