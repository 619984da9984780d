package stream

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Metrics records, per message, dropstream.stage.messages by outcome,
// dropstream.stage.handler.duration and dropstream.stage.message.age (time
// from publish to processing).
func Metrics(mp metric.MeterProvider, info StageInfo) Middleware {
	meter := mp.Meter(instrumentationScope)
	processed, _ := meter.Int64Counter("dropstream.stage.messages",
		metric.WithDescription("Messages handled by a stage, by outcome."), metric.WithUnit("{message}"))
	duration, _ := meter.Float64Histogram("dropstream.stage.handler.duration",
		metric.WithDescription("Time spent in a stage's handler per message."), metric.WithUnit("s"))
	age, _ := meter.Float64Histogram("dropstream.stage.message.age",
		metric.WithDescription("Time from a message's publication to the start of its processing."), metric.WithUnit("s"))
	base := []attribute.KeyValue{keyStage.String(info.Stage), keyStream.String(info.Topic.String())}
	// Option slices are built once: passing a variadic option per call
	// allocates on this per-message path.
	common := []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(base...))}
	byOutcome := map[Outcome][]metric.AddOption{}
	for _, o := range []Outcome{OutcomeAcked, OutcomeDropped, OutcomeDeadLettered, OutcomeFailed} {
		byOutcome[o] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(append(base[:len(base):len(base)], keyOutcome.String(string(o)))...))}
	}
	// Measurements use a context without the message's span: with a
	// sampled span in context the SDK records an exemplar per measurement,
	// which costs more than the measurement itself at this rate.
	bg := context.Background()
	return func(next Handler) Handler {
		return func(ctx context.Context, msg *Message) error {
			start := time.Now()
			if ms, ok := idMillis(msg.ID); ok && msg.Attempt == 1 {
				age.Record(bg, max(0, float64(start.UnixMilli()-ms)/1e3), common...)
			}
			err := next(ctx, msg)
			duration.Record(bg, time.Since(start).Seconds(), common...)
			processed.Add(bg, 1, byOutcome[Classify(err)]...)
			return err
		}
	}
}
