package otel

import (
	"os"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// AddSpanProcessor registers sp on the tracer provider: it sees every span
// that ends from then on (a console's buffer of recent traces, say).
func (p *Providers) AddSpanProcessor(sp sdktrace.SpanProcessor) { p.tp.RegisterSpanProcessor(sp) }

// DefaultSpanQueue is the spans waiting for export, when
// OTEL_BSP_MAX_QUEUE_SIZE is unset. The SDK's 2,048 dropped spans of
// every message traced on a loaded machine (BENCHMARKS.md, "Stream
// runtime"); a span is about 1 KB, so a full queue holds about 32 MB.
const DefaultSpanQueue = 32 * 1024

// NewSpanProcessor returns the processor [Setup] exports spans through: the
// SDK's batch span processor, sized by the OTEL_BSP_* variables, with a
// queue of DefaultSpanQueue unless OTEL_BSP_MAX_QUEUE_SIZE says otherwise.
// A full queue drops spans rather than blocking: a collector that is down
// must not stop the stages.
func NewSpanProcessor(exp sdktrace.SpanExporter) sdktrace.SpanProcessor {
	var opts []sdktrace.BatchSpanProcessorOption
	if os.Getenv("OTEL_BSP_MAX_QUEUE_SIZE") == "" {
		opts = append(opts, sdktrace.WithMaxQueueSize(DefaultSpanQueue))
	}
	return sdktrace.NewBatchSpanProcessor(exp, opts...)
}
