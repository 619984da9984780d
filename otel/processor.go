package otel

import sdktrace "go.opentelemetry.io/otel/sdk/trace"

// AddSpanProcessor registers sp on the tracer provider: it sees every span
// that ends from then on (a console's buffer of recent traces, say).
func (p *Providers) AddSpanProcessor(sp sdktrace.SpanProcessor) { p.tp.RegisterSpanProcessor(sp) }

// NewSpanProcessor returns the processor [Setup] exports spans through: the
// SDK's batch span processor, sized by the OTEL_BSP_* variables, with a span's
// End waiting for room in the queue instead of dropping the span. An
// exporter that cannot keep up slows the stages down rather than losing what
// they recorded; sampling is what lowers that load. With the SDK's default
// (dropping) a loaded machine lost spans of every message traced: see
// BENCHMARKS.md, "Stream runtime".
func NewSpanProcessor(exp sdktrace.SpanExporter) sdktrace.SpanProcessor {
	return sdktrace.NewBatchSpanProcessor(exp, sdktrace.WithBlocking())
}
