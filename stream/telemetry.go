package stream

import (
	"context"
	"log/slog"

	gotel "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
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

func (t Telemetry) withDefaults() Telemetry {
	if t.TracerProvider == nil {
		t.TracerProvider = gotel.GetTracerProvider()
	}
	if t.MeterProvider == nil {
		t.MeterProvider = gotel.GetMeterProvider()
	}
	if t.Propagator == nil {
		t.Propagator = gotel.GetTextMapPropagator()
	}
	if t.Logger == nil {
		t.Logger = slog.Default()
	}
	return t
}

// Messaging semantic-convention attribute keys.
var (
	attrSystem      = attribute.String("messaging.system", "redis")
	keyDestination  = attribute.Key("messaging.destination.name")
	keyGroup        = attribute.Key("messaging.consumer.group.name")
	keyMessageID    = attribute.Key("messaging.message.id")
	keyOperation    = attribute.Key("messaging.operation.type")
	keyBatchCount   = attribute.Key("messaging.batch.message_count")
	keyPartition    = attribute.Key("messaging.destination.partition.id")
	keyDeliveries   = attribute.Key("dropstream.message.attempt")
	keyStage        = attribute.Key("stage")
	keyStream       = attribute.Key("stream")
	keyOutcome      = attribute.Key("outcome")
	keyConsumerName = attribute.Key("messaging.consumer.name")
)

// metadataCarrier adapts message metadata to a propagation carrier.
type metadataCarrier struct{ m *Message }

func (c metadataCarrier) Get(key string) string { return c.m.Metadata[key] }
func (c metadataCarrier) Set(key, value string) {
	if c.m.Metadata == nil {
		c.m.Metadata = make(map[string]string, 2)
	}
	c.m.Metadata[key] = value
}
func (c metadataCarrier) Keys() []string {
	keys := make([]string, 0, len(c.m.Metadata))
	for k := range c.m.Metadata {
		keys = append(keys, k)
	}
	return keys
}

// InjectTrace writes the trace context of ctx into the message's metadata.
func InjectTrace(ctx context.Context, p propagation.TextMapPropagator, m *Message) {
	p.Inject(ctx, metadataCarrier{m})
}

// ExtractTrace returns ctx carrying the trace context found in the message's
// metadata, as a remote parent.
func ExtractTrace(ctx context.Context, p propagation.TextMapPropagator, m *Message) context.Context {
	if len(m.Metadata) == 0 {
		return ctx
	}
	return p.Extract(ctx, metadataCarrier{m})
}
