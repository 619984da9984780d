package stream

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// StageInfo identifies a stage to its middlewares.
type StageInfo struct {
	Stage    string
	Topic    Topic
	Group    string
	Consumer string
}

// Tracing starts a consumer span "process <topic>" per message, as a child of
// the trace context the message carries, following the OTel messaging
// conventions. The handler's context carries the span, and so does
// msg.Context(), so anything it publishes continues the trace.
func Tracing(tp trace.TracerProvider, prop propagation.TextMapPropagator, info StageInfo) Middleware {
	tracer := tp.Tracer(instrumentationScope)
	name := "process " + info.Topic.String()
	return func(next Handler) Handler {
		return func(ctx context.Context, msg *Message) error {
			ctx = ExtractTrace(ctx, prop, msg)
			ctx, span := tracer.Start(ctx, name,
				trace.WithSpanKind(trace.SpanKindConsumer),
				trace.WithAttributes(attrSystem,
					keyOperation.String("process"),
					keyDestination.String(info.Topic.String()),
					keyPartition.String(strconv.Itoa(msg.Partition)),
					keyGroup.String(info.Group),
					keyConsumerName.String(info.Consumer),
					keyMessageID.String(msg.ID),
					keyMessageKey.String(msg.Key),
					keyDeliveries.Int(msg.Attempt)))
			msg.ctx = ctx
			err := next(ctx, msg)
			if err != nil {
				span.RecordError(err)
				span.SetStatus(codes.Error, err.Error())
				span.SetAttributes(keyOutcome.String(string(Classify(err))))
			}
			span.End()
			return err
		}
	}
}
