package stream

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/dropstream/dropstream/internal/benchstat"
	"github.com/dropstream/dropstream/internal/telemetrytest"
	dsotel "github.com/dropstream/dropstream/otel"
)

// BenchmarkRunnerChain measures the runtime's per-message middleware cost,
// without Redis: with no telemetry; for a message carrying a sampled or an
// unsampled parent; and for a message with no parent under 1 % parent-based
// sampling; "none-noparent" is a message without trace context and no
// telemetry. The difference to "none" is what telemetry costs per message,
// and "none" less "none-noparent" what carrying a trace context costs.
// The "-run" cases are messages of a run with one trace context, as the
// runner reads them from one publish (see traceReuse). "-nometrics" has the
// SDK's tracer but no meter: what it saves is the histograms' cost.
func BenchmarkRunnerChain(b *testing.B) {
	for _, tc := range []struct {
		name    string
		sampler sdktrace.Sampler
		parent  bool
		run     bool
	}{
		{"none", nil, true, false},
		{"none-run", nil, true, true},
		{"none-noparent", nil, false, false},
		{"sampled", sdktrace.AlwaysSample(), true, false},
		{"sampled-run", sdktrace.AlwaysSample(), true, true},
		{"unsampled", sdktrace.NeverSample(), true, false},
		{"unsampled-run", sdktrace.NeverSample(), true, true},
		{"unsampled-run-nometrics", sdktrace.NeverSample(), true, true},
		{"root-1%", sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.01)), false, false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			tel := Telemetry{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider(),
				Propagator: propagation.TraceContext{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			if tc.sampler != nil {
				tp := dsotel.NewTracerProvider(tc.sampler, nil, discardExporter{})
				defer tp.Shutdown(context.Background())
				tel.TracerProvider = tp
				// The binary's provider: the SDK's, with bound histograms.
				if !strings.HasSuffix(tc.name, "nometrics") {
					tel.MeterProvider, _ = telemetrytest.Metrics(b)
				}
			}
			r, err := NewRunner(nil, Stage{Name: "b", Topic: NewTopic("b", "c", 1),
				Handler: func(context.Context, *Message) error { return nil }}, tel)
			if err != nil {
				b.Fatal(err)
			}
			fields := map[string]any{"key": "k1", "type": "t", "payload": "0123456789"}
			if tc.parent {
				tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
				if tc.sampler != nil && strings.HasPrefix(tc.name, "unsampled") {
					tp = sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
				}
				ctx, span := tp.Tracer("x").Start(context.Background(), "root")
				span.End()
				parent := &Message{}
				InjectTrace(ctx, tel.Propagator, parent)
				fields["traceparent"] = parent.TraceParent
			}
			var reuse *traceReuse
			if tc.run {
				reuse = &traceReuse{}
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			cpu := benchstat.ProcessCPU()
			for i := 0; i < b.N; i++ {
				m := decodeMessage("s", 0, "1700000000000-1", fields)
				m.reuse = reuse
				if err := r.handler(ctx, m); err != nil {
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

// BenchmarkReadReply measures reading a batch of 500 entries from the raw
// XREADGROUP reply, per message, with and without a trace context (one
// per batch, as one publish gives).
func BenchmarkReadReply(b *testing.B) {
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
	payload := strings.Repeat("x", 200)
	for _, traced := range []bool{false, true} {
		entries := make([]replyEntry, 500)
		for i := range entries {
			f := []string{"key", fmt.Sprint(i % 1024), "type", "bench", "payload", payload}
			if traced {
				f = append(f, "traceparent", tp)
			}
			entries[i] = replyEntry{fmt.Sprintf("1700000000000-%d", i), f}
		}
		raw := []byte(encodeReadReply(true, "s", entries))
		b.Run(fmt.Sprintf("traced=%v", traced), func(b *testing.B) {
			var reuse entryReuse
			b.ReportAllocs()
			for b.Loop() {
				if _, err := parseReadReply(raw, "s", 0, &reuse); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(entries)), "ns/msg")
		})
	}
}
