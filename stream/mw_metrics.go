package stream

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	dsotel "github.com/dropstream/dropstream/otel"
)

// Metrics records, per message, dropstream.stage.handler.duration and
// dropstream.stage.message.age (time from publish to processing). The
// runner counts dropstream.stage.messages by outcome once per batch.
func Metrics(mp metric.MeterProvider, info StageInfo) Middleware {
	meter := mp.Meter(instrumentationScope)
	duration, _ := meter.Float64Histogram(dsotel.MetricStageHandlerDuration,
		metric.WithDescription("Time spent in a stage's handler per message."), metric.WithUnit(dsotel.UnitSeconds))
	age, _ := meter.Float64Histogram(dsotel.MetricStageMessageAge,
		metric.WithDescription("Time from a message's publication to the start of its processing."), metric.WithUnit(dsotel.UnitSeconds))
	base := []attribute.KeyValue{keyStage.String(info.Stage), keyStream.String(info.Topic.String())}
	// The option slice is built once: passing a variadic option per call
	// allocates on this per-message path.
	common := []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(base...))}
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
			return err
		}
	}
}
