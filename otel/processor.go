package otel

import sdktrace "go.opentelemetry.io/otel/sdk/trace"

// AddSpanProcessor registers sp on the tracer provider: it sees every span
// that ends from then on (a console's buffer of recent traces, say).
func (p *Providers) AddSpanProcessor(sp sdktrace.SpanProcessor) { p.tp.RegisterSpanProcessor(sp) }
