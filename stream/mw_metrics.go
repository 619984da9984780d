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
	attrs := attribute.NewSet(dsotel.StageKey.String(info.Stage), dsotel.StreamKey.String(info.Topic.String()))
	duration := latencyHistogram(mp, dsotel.MetricStageHandlerDuration, descHandlerDuration, attrs)
	age := latencyHistogram(mp, dsotel.MetricStageMessageAge, descMessageAge, attrs)
	return func(next Handler) Handler {
		return func(ctx context.Context, msg *Message) error {
			start := time.Now()
			if ms, ok := idMillis(msg.ID); ok && msg.Attempt == 1 {
				age(max(0, float64(start.UnixMilli()-ms)/1e3))
			}
			err := next(ctx, msg)
			duration(time.Since(start).Seconds())
			return err
		}
	}
}
