package stream

import (
	"context"

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
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrSystem,
		keyOperation.String("process"), keyDestination.String(info.Topic.String()), keyGroup.String(info.Group))}
	return func(next Handler) Handler {
		return func(ctx context.Context, msg *Message) error {
			ctx = ExtractTrace(ctx, prop, msg)
			// Few attributes per span, and options built once: this runs
			// for every message. Redeliveries add their attempt.
			ctx, span := tracer.Start(ctx, name, opts...)
			if span.IsRecording() {
				span.SetAttributes(keyMessageID.String(msg.ID))
			}
			if msg.Attempt > 1 {
				span.SetAttributes(keyDeliveries.Int(msg.Attempt), keyConsumerName.String(info.Consumer))
			}
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
