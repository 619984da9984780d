package stream

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/dropstream/dropstream/internal/benchstat"
	dsotel "github.com/dropstream/dropstream/otel"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// BenchmarkRunnerChain measures the runtime's per-message middleware cost,
// without Redis: with no telemetry; for a message carrying a sampled or an
// unsampled parent; and for a message with no parent under 1 % parent-based
// sampling; "none-noparent" is a message without trace context and no
// telemetry. The difference to "none" is what telemetry costs per message,
// and "none" less "none-noparent" what carrying a trace context costs.
func BenchmarkRunnerChain(b *testing.B) {
	for _, tc := range []struct {
		name    string
		sampler sdktrace.Sampler
		parent  bool
	}{
		{"none", nil, true},
		{"none-noparent", nil, false},
		{"sampled", sdktrace.AlwaysSample(), true},
		{"unsampled", sdktrace.NeverSample(), true},
		{"root-1%", sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.01)), false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			tel := Telemetry{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider(),
				Propagator: propagation.TraceContext{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			if tc.sampler != nil {
				tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(tc.sampler), sdktrace.WithBatcher(discardExporter{}))
				defer tp.Shutdown(context.Background())
				tel.TracerProvider = tp
				// The binary's provider: the SDK's, with bound histograms.
				hist := dsotel.NewHistograms()
				tel.MeterProvider = dsotel.NewMeterProvider(sdkmetric.NewMeterProvider(
					sdkmetric.WithReader(sdkmetric.NewManualReader(sdkmetric.WithProducer(hist)))), hist)
			}
			r, err := NewRunner(nil, Stage{Name: "b", Topic: NewTopic("b", "c", 1),
				Handler: func(context.Context, *Message) error { return nil }}, tel)
			if err != nil {
				b.Fatal(err)
			}
			fields := map[string]any{"key": "k1", "type": "t", "payload": "0123456789"}
			if tc.parent {
				tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
				if tc.sampler != nil && tc.name == "unsampled" {
					tp = sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
				}
				ctx, span := tp.Tracer("x").Start(context.Background(), "root")
				span.End()
				parent := &Message{}
				InjectTrace(ctx, tel.Propagator, parent)
				fields["traceparent"] = parent.TraceParent
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu := benchstat.ProcessCPU()
			for i := 0; i < b.N; i++ {
				m := decodeMessage("s", 0, "1700000000000-1", fields)
				if err := r.handler(context.Background(), m); err != nil {
					b.Fatal(err)
				}
			}
			// CPU time rather than wall time: steadier on a shared machine.
			b.ReportMetric(float64((benchstat.ProcessCPU()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }
