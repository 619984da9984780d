package stream

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// BenchmarkRunnerChain measures the runtime's per-message middleware cost,
// without Redis, for a message carrying a sampled or an unsampled parent.
func BenchmarkRunnerChain(b *testing.B) {
	for _, tc := range []struct {
		name    string
		sampler sdktrace.Sampler
	}{{"sampled", sdktrace.AlwaysSample()}, {"unsampled", sdktrace.NeverSample()}} {
		b.Run(tc.name, func(b *testing.B) {
			tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(tc.sampler), sdktrace.WithBatcher(discardExporter{}))
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			defer tp.Shutdown(context.Background())
			tel := Telemetry{TracerProvider: tp, MeterProvider: mp, Propagator: propagation.TraceContext{},
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			r, err := NewRunner(nil, Stage{Name: "b", Topic: NewTopic("b", "c", 1),
				Handler: func(context.Context, *Message) error { return nil }}, tel)
			if err != nil {
				b.Fatal(err)
			}
			ctx, span := tp.Tracer("x").Start(context.Background(), "root")
			span.End()
			parent := &Message{}
			InjectTrace(ctx, tel.Propagator, parent)
			fields := map[string]any{"key": "k1", "type": "t", "payload": "0123456789", "traceparent": parent.Metadata["traceparent"]}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				m := decodeMessage("s", 0, "1700000000000-1", fields)
				if err := r.handler(context.Background(), m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }
