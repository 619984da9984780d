package otel

import (
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// ScopeName is the instrumentation scope every dropstream package passes to
// TracerProvider.Tracer and MeterProvider.Meter, so that all spans and
// instruments of the project share one scope. In Prometheus output it appears
// as the otel_scope_name label.
const ScopeName = "github.com/dropstream/dropstream"

// SchemaURL is the OpenTelemetry semantic-conventions schema the attribute keys
// below conform to (semconv v1.43.0). Pass it with trace.WithSchemaURL /
// metric.WithSchemaURL when creating tracers and meters.
const SchemaURL = semconv.SchemaURL

// Messaging attribute keys from the OpenTelemetry messaging semantic
// conventions (semconv v1.43.0). Use them on publish/process spans and, where
// cardinality allows, on metrics.
const (
	// MessagingSystemKey identifies the messaging system; dropstream always
	// uses [MessagingSystemRedis].
	MessagingSystemKey = semconv.MessagingSystemKey // "messaging.system"
	// MessagingDestinationNameKey is the stream name (the Redis key).
	MessagingDestinationNameKey = semconv.MessagingDestinationNameKey // "messaging.destination.name"
	// MessagingConsumerGroupNameKey is the Redis consumer group name.
	MessagingConsumerGroupNameKey = semconv.MessagingConsumerGroupNameKey // "messaging.consumer.group.name"
	// MessagingMessageIDKey is the stream entry id ("1700000000000-0").
	MessagingMessageIDKey = semconv.MessagingMessageIDKey // "messaging.message.id"
	// MessagingOperationTypeKey is the kind of operation; see the
	// MessagingOperation* values.
	MessagingOperationTypeKey = semconv.MessagingOperationTypeKey // "messaging.operation.type"
	// MessagingOperationNameKey is the system-specific operation name, e.g.
	// "publish", "process" or "ack".
	MessagingOperationNameKey = semconv.MessagingOperationNameKey // "messaging.operation.name"
	// MessagingBatchMessageCountKey is the number of messages in a batch
	// operation; set it on batch spans only (count ≥ 2 per the conventions).
	MessagingBatchMessageCountKey = semconv.MessagingBatchMessageCountKey // "messaging.batch.message_count"
	// MessagingDestinationPartitionIDKey is the partition of the stream
	// (its index within the topic).
	MessagingDestinationPartitionIDKey = semconv.MessagingDestinationPartitionIDKey // "messaging.destination.partition.id"
	// MessagingConsumerNameKey is the Redis consumer name within its
	// group. The conventions name it but semconv v1.43.0 has no constant.
	MessagingConsumerNameKey = attribute.Key("messaging.consumer.name")
	// MessageAttemptKey is the delivery attempt of a message, 1 for the
	// first (dropstream's own).
	MessageAttemptKey = attribute.Key("dropstream.message.attempt")
)

// MessagingSystemRedis is the messaging.system value for Redis Streams. The
// semantic conventions have no registered value for Redis, so it is defined
// here.
const MessagingSystemRedis = "redis"

// Pre-built messaging attributes. They are shared, immutable values: pass them
// to span and metric options as they are.
var (
	// MessagingSystem is messaging.system="redis".
	MessagingSystem = MessagingSystemKey.String(MessagingSystemRedis)
	// MessagingOperationSend is messaging.operation.type="send" (publishing
	// to a stream, XADD).
	MessagingOperationSend = semconv.MessagingOperationTypeSend
	// MessagingOperationReceive is messaging.operation.type="receive"
	// (XREADGROUP / XAUTOCLAIM).
	MessagingOperationReceive = semconv.MessagingOperationTypeReceive
	// MessagingOperationProcess is messaging.operation.type="process"
	// (running a stage handler).
	MessagingOperationProcess = semconv.MessagingOperationTypeProcess
	// MessagingOperationSettle is messaging.operation.type="settle" (XACK,
	// moving to the dead-letter stream).
	MessagingOperationSettle = semconv.MessagingOperationTypeSettle
)

// Span names follow the messaging conventions: "<operation name> <destination>".
const (
	// OperationPublish is the operation name of publish spans.
	OperationPublish = "publish"
	// OperationProcess is the operation name of process spans.
	OperationProcess = "process"
)

// Dropstream attribute keys used on metrics. They are short on purpose: in
// Prometheus they become the labels stage, stream, group, flow and outcome.
// Keep their values low-cardinality (never a message id or business key).
const (
	// StageKey is the stage name.
	StageKey = attribute.Key("stage")
	// StreamKey is the stream name (without partition suffix when the
	// metric is aggregated across partitions).
	StreamKey = attribute.Key("stream")
	// GroupKey is the consumer group name.
	GroupKey = attribute.Key("group")
	// FlowKey is the domain flow name.
	FlowKey = attribute.Key("flow")
	// OutcomeKey is the result of handling a message; see the Outcome* values.
	OutcomeKey = attribute.Key("outcome")
	// EmbeddedKey is the resource attribute set by [Setup]: true when the
	// process runs against in-process miniredis.
	EmbeddedKey = attribute.Key("dropstream.embedded")
)

// Values of [OutcomeKey] for stage metrics: the stream runtime's outcomes
// (stream.OutcomeAcked and the rest), repeated here for packages that
// report outcomes of their own, such as the notifier's duplicates.
const (
	// OutcomeAcked means the handler succeeded and the message was acknowledged.
	OutcomeAcked = "acked"
	// OutcomeFailed means the handler failed and the message stays pending for
	// redelivery.
	OutcomeFailed = "failed"
	// OutcomeDeadLettered means the message was moved to "<stream>:dlq".
	OutcomeDeadLettered = "dead_lettered"
	// OutcomeDropped means the handler skipped the message on purpose.
	OutcomeDropped = "dropped"
	// OutcomeDuplicate means the idempotency ledger already held the business
	// key, so the effect was not applied again.
	OutcomeDuplicate = "duplicate"
)

// Instrument units (UCUM, as the OpenTelemetry conventions require). The
// Prometheus exporter turns "s" into a _seconds suffix and drops
// curly-brace annotations such as "{message}".
const (
	// UnitSeconds is the unit of every duration/latency/age histogram.
	UnitSeconds = "s"
	// UnitMessages is the unit of message counts and gauges.
	UnitMessages = "{message}"
)

// Metric (instrument) names shared by the whole project. The comment of each
// gives the instrument kind, unit, attributes, and the name it is exposed
// under at /metrics.
const (
	// MetricStageMessages counts messages handled by a stage.
	// Int64Counter, unit {message}, attributes stage, stream, outcome.
	// Prometheus: dropstream_stage_messages_total.
	MetricStageMessages = "dropstream.stage.messages"

	// MetricStageHandlerDuration is the wall time of one handler call (one
	// batch). Float64Histogram, unit s, attributes stage, stream, outcome.
	// Prometheus: dropstream_stage_handler_duration_seconds.
	MetricStageHandlerDuration = "dropstream.stage.handler.duration"

	// MetricStageMessageAge is the time from publishing a message to a stage
	// starting to process it. Float64Histogram, unit s, attributes stage,
	// stream. Prometheus: dropstream_stage_message_age_seconds.
	MetricStageMessageAge = "dropstream.stage.message.age"

	// MetricStageLag is the number of entries in the stream not yet delivered
	// to the stage's consumer group. Int64Gauge or Int64ObservableGauge, unit
	// {message}, attributes stage, stream. Prometheus: dropstream_stage_lag.
	MetricStageLag = "dropstream.stage.lag"

	// MetricStagePending is the number of delivered but unacknowledged
	// entries of the stage's group. Gauge, unit {message}, attributes stage,
	// stream. Prometheus: dropstream_stage_pending.
	MetricStagePending = "dropstream.stage.pending"

	// MetricStagePendingOldestAge is the age of the oldest delivered but
	// unacknowledged entry of the stage's group (from the time it was
	// published), 0 when nothing is pending. Gauge, unit s, attributes
	// stage, stream, group. Prometheus:
	// dropstream_stage_pending_oldest_age_seconds.
	MetricStagePendingOldestAge = "dropstream.stage.pending.oldest_age"

	// MetricStagePaused is 1 while the stage is paused (see
	// stream.Control), else 0, as each copy of the stage last saw it.
	// Int64ObservableGauge, no unit, attributes stage, stream, group.
	// Prometheus: dropstream_stage_paused.
	MetricStagePaused = "dropstream.stage.paused"

	// MetricStageConservationDrift is the stage group's published entries
	// minus those accounted for (acknowledged, dead-lettered, dropped,
	// skipped, delayed, requeued, pending, not yet delivered): 0 unless
	// entries were lost or counted twice. Int64ObservableGauge, unit
	// {message}, attributes stage, stream, group. Prometheus:
	// dropstream_stage_conservation_drift.
	MetricStageConservationDrift = "dropstream.stage.conservation.drift"

	// MetricDLQLength is the length of a dead-letter stream. Gauge, unit
	// {message}, attribute stream (the source stream). Prometheus:
	// dropstream_dlq_length.
	MetricDLQLength = "dropstream.dlq.length"

	// MetricStreamPublished counts entries appended to a stream.
	// Int64Counter, unit {message}, attribute stream.
	// Prometheus: dropstream_stream_published_total.
	MetricStreamPublished = "dropstream.stream.published"

	// MetricEndToEndLatency is the time from a change being observed to its
	// delivery at the end of a flow. Float64Histogram, unit s, attribute flow.
	// Prometheus: dropstream_e2e_latency_seconds.
	MetricEndToEndLatency = "dropstream.e2e.latency"
)

// Field names that [Inject] may write into stream entry fields. Application
// fields must not use them.
const (
	// FieldTraceparent carries the W3C traceparent.
	FieldTraceparent = "traceparent"
	// FieldTracestate carries the W3C tracestate, when non-empty.
	FieldTracestate = "tracestate"
	// FieldBaggage carries W3C baggage, when non-empty.
	FieldBaggage = "baggage"
)
