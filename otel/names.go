package otel

import (
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// ScopeName is the instrumentation scope of every dropstream tracer and
// meter (the otel_scope_name label in Prometheus).
const ScopeName = "github.com/dropstream/dropstream"

// SchemaURL is the semantic-conventions schema (v1.43.0) of the attribute
// keys below; pass it when creating tracers and meters.
const SchemaURL = semconv.SchemaURL

// Messaging attribute keys of the OpenTelemetry semantic conventions.
const (
	// MessagingDestinationNameKey is the stream name (the Redis key).
	MessagingDestinationNameKey = semconv.MessagingDestinationNameKey // "messaging.destination.name"
	// MessagingConsumerGroupNameKey is the Redis consumer group name.
	MessagingConsumerGroupNameKey = semconv.MessagingConsumerGroupNameKey // "messaging.consumer.group.name"
	// MessagingMessageIDKey is the stream entry id ("1700000000000-0").
	MessagingMessageIDKey = semconv.MessagingMessageIDKey // "messaging.message.id"
	// MessagingOperationTypeKey is the kind of operation.
	MessagingOperationTypeKey = semconv.MessagingOperationTypeKey // "messaging.operation.type"
	// MessagingBatchMessageCountKey is the number of messages of a batch
	// span (2 or more).
	MessagingBatchMessageCountKey = semconv.MessagingBatchMessageCountKey // "messaging.batch.message_count"
	// MessagingDestinationPartitionIDKey is the stream's partition.
	MessagingDestinationPartitionIDKey = semconv.MessagingDestinationPartitionIDKey // "messaging.destination.partition.id"
	// MessagingConsumerNameKey is the Redis consumer name (semconv has no
	// constant for it).
	MessagingConsumerNameKey = attribute.Key("messaging.consumer.name")
	// MessageAttemptKey is a message's delivery attempt, 1 for the first.
	MessageAttemptKey = attribute.Key("dropstream.message.attempt")
)

// MessagingSystem is messaging.system="redis" (the conventions register no
// value for Redis).
var MessagingSystem = semconv.MessagingSystemKey.String("redis")

// Attribute keys of dropstream's metrics: the Prometheus labels. Keep
// their values low-cardinality (never a message id or business key).
const (
	// StageKey is the stage name.
	StageKey = attribute.Key("stage")
	// StreamKey is the stream name, without the partition suffix when the
	// metric sums the partitions.
	StreamKey = attribute.Key("stream")
	// FlowKey is the flow name.
	FlowKey = attribute.Key("flow")
	// OutcomeKey is the result of handling a message (the Outcome* values).
	OutcomeKey = attribute.Key("outcome")
	// EmbeddedKey is the resource attribute set by [Setup]: true when the
	// process runs against in-process miniredis.
	EmbeddedKey = attribute.Key("dropstream.embedded")
)

// Values of [OutcomeKey]: the stream runtime's outcomes, for packages that
// report outcomes of their own.
const (
	// OutcomeAcked: the handler succeeded and the message was acknowledged.
	OutcomeAcked = "acked"
	// OutcomeFailed: the handler failed; the message stays pending.
	OutcomeFailed = "failed"
	// OutcomeDeadLettered: the message moved to "<stream>:dlq".
	OutcomeDeadLettered = "dead_lettered"
	// OutcomeDropped: the handler skipped the message on purpose.
	OutcomeDropped = "dropped"
	// OutcomeDuplicate: the idempotency ledger held the business key, so
	// the effect was not applied again.
	OutcomeDuplicate = "duplicate"
)

// Instrument units (UCUM). Prometheus turns "s" into a _seconds suffix and
// drops annotations such as "{message}".
const (
	// UnitSeconds is the unit of every duration histogram.
	UnitSeconds = "s"
	// UnitMessages is the unit of message counts and gauges.
	UnitMessages = "{message}"
)

// Metric names shared by the whole project; each comment gives the
// instrument, its unit, its attributes and its Prometheus name.
const (
	// MetricStageMessages counts messages handled by a stage. Counter,
	// {message}; stage, stream, outcome; dropstream_stage_messages_total.
	MetricStageMessages = "dropstream.stage.messages"

	// MetricStageHandlerDuration is the wall time of one handler call.
	// Histogram, s; stage, stream, outcome;
	// dropstream_stage_handler_duration_seconds.
	MetricStageHandlerDuration = "dropstream.stage.handler.duration"

	// MetricStageMessageAge is the time from publishing a message to a
	// stage starting it. Histogram, s; stage, stream;
	// dropstream_stage_message_age_seconds.
	MetricStageMessageAge = "dropstream.stage.message.age"

	// MetricStageLag is the entries not yet delivered to the stage's group.
	// Gauge, {message}; stage, stream; dropstream_stage_lag.
	MetricStageLag = "dropstream.stage.lag"

	// MetricStagePending is the delivered, unacknowledged entries of the
	// stage's group. Gauge, {message}; stage, stream; dropstream_stage_pending.
	MetricStagePending = "dropstream.stage.pending"

	// MetricStagePendingOldestAge is the age of the oldest pending entry, 0
	// when none. Gauge, s; stage, stream, group;
	// dropstream_stage_pending_oldest_age_seconds.
	MetricStagePendingOldestAge = "dropstream.stage.pending.oldest_age"

	// MetricStagePaused is 1 while the stage is paused (stream.Control).
	// Gauge; stage, stream, group; dropstream_stage_paused.
	MetricStagePaused = "dropstream.stage.paused"

	// MetricStageConservationDrift is the group's published entries minus
	// those accounted for: 0 unless entries were lost or counted twice.
	// Gauge, {message}; stage, stream, group;
	// dropstream_stage_conservation_drift.
	MetricStageConservationDrift = "dropstream.stage.conservation.drift"

	// MetricDLQLength is the length of a dead-letter stream. Gauge,
	// {message}; stream (the source); dropstream_dlq_length.
	MetricDLQLength = "dropstream.dlq.length"

	// MetricStreamPublished counts entries appended to a stream. Counter,
	// {message}; stream; dropstream_stream_published_total.
	MetricStreamPublished = "dropstream.stream.published"

	// MetricEndToEndLatency is the time from a change being observed to its
	// delivery at the end of a flow. Histogram, s; flow;
	// dropstream_e2e_latency_seconds.
	MetricEndToEndLatency = "dropstream.e2e.latency"
)
