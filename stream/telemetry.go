package stream

import (
	"cmp"
	"context"
	"log/slog"

	gotel "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// instrumentationScope names the tracer and meter of the runtime.
const instrumentationScope = "github.com/dropstream/dropstream/stream"

// Telemetry carries the providers the runtime instruments itself with.
// Nil fields default to the OpenTelemetry globals and slog.Default.
type Telemetry struct {
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	Propagator     propagation.TextMapPropagator
	Logger         *slog.Logger
}

// WithDefaults returns t with each nil field set to the OpenTelemetry
// global (tracer and meter providers, propagator) or slog.Default.
func (t Telemetry) WithDefaults() Telemetry {
	t.TracerProvider = cmp.Or(t.TracerProvider, gotel.GetTracerProvider())
	t.MeterProvider = cmp.Or(t.MeterProvider, gotel.GetMeterProvider())
	t.Propagator = cmp.Or(t.Propagator, gotel.GetTextMapPropagator())
	t.Logger = cmp.Or(t.Logger, slog.Default())
	return t
}

// metadataCarrier adapts a message's trace context and metadata to a
// propagation carrier: the W3C trace context goes to its own fields, any
// other entry (baggage) to Metadata.
type metadataCarrier struct{ m *Message }

func (c metadataCarrier) Get(key string) string {
	switch key {
	case MetaTraceParent:
		return c.m.TraceParent
	case MetaTraceState:
		return c.m.TraceState
	}
	return c.m.Metadata[key]
}

func (c metadataCarrier) Set(key, value string) {
	switch key {
	case MetaTraceParent:
		c.m.TraceParent = value
	case MetaTraceState:
		c.m.TraceState = value
	default:
		if c.m.Metadata == nil {
			c.m.Metadata = make(map[string]string, 2)
		}
		c.m.Metadata[key] = value
	}
}

func (c metadataCarrier) Keys() []string {
	keys := make([]string, 0, 2+len(c.m.Metadata))
	if c.m.TraceParent != "" {
		keys = append(keys, MetaTraceParent)
	}
	if c.m.TraceState != "" {
		keys = append(keys, MetaTraceState)
	}
	for k := range c.m.Metadata {
		keys = append(keys, k)
	}
	return keys
}

// InjectTrace writes the trace context of ctx into the message: its
// TraceParent and TraceState, and any baggage into its metadata.
func InjectTrace(ctx context.Context, p propagation.TextMapPropagator, m *Message) {
	p.Inject(ctx, metadataCarrier{m})
}

// sharedTrace injects the trace context of one parent (a publish span)
// into the messages that carry none of their own: formatted for the first,
// copied to the rest.
type sharedTrace struct {
	parent context.Context
	// copied: traceParent and traceState are what injecting parent writes
	// into a message with no trace context and no metadata.
	copied                  bool
	traceParent, traceState string
}

// inject is InjectTrace(c.parent, p, m), copying the first injection's
// result when that wrote only a traceparent (and trace state) into a message
// that had none and no metadata.
func (c *sharedTrace) inject(p propagation.TextMapPropagator, m *Message) {
	if c.copied {
		m.TraceParent = c.traceParent
		if c.traceState != "" {
			m.TraceState = c.traceState
		}
		return
	}
	tp, ts, meta := m.TraceParent, m.TraceState, len(m.Metadata)
	InjectTrace(c.parent, p, m)
	c.copied = tp == "" && ts == "" && meta == 0 && m.TraceParent != "" && len(m.Metadata) == 0
	c.traceParent, c.traceState = m.TraceParent, m.TraceState
}

// ExtractTrace returns ctx carrying the trace context found in the message
// (and any baggage in its metadata), as a remote parent.
func ExtractTrace(ctx context.Context, p propagation.TextMapPropagator, m *Message) context.Context {
	if m.TraceParent == "" && len(m.Metadata) == 0 {
		return ctx
	}
	return p.Extract(ctx, metadataCarrier{m})
}
