package stream

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	dsotel "github.com/dropstream/dropstream/otel"
)

// StageInfo identifies a stage to its middlewares.
type StageInfo struct {
	Stage    string
	Topic    Topic
	Group    string
	Consumer string
}

// tracing starts a consumer span "process <topic>" per message, a child of
// the trace context it carries (OTel messaging conventions); the handler's
// context and msg.Context() carry it. A message of an unsampled parent gets
// no span: its parent passes through unchanged, as a parent-based sampler
// would decide. A message the runner read extracts a run of one trace
// context once (traceReuse).
func tracing(tp trace.TracerProvider, prop propagation.TextMapPropagator, info StageInfo) Middleware {
	tracer := tp.Tracer(instrumentationScope)
	name := "process " + info.Topic.String()
	// Only the kind is passed at start: the attributes are set when the
	// span records, as passing them would copy them for every message.
	start := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}
	attrs := []attribute.KeyValue{dsotel.MessagingSystem, dsotel.MessagingOperationTypeKey.String("process"),
		dsotel.MessagingDestinationNameKey.String(info.Topic.String()), dsotel.MessagingConsumerGroupNameKey.String(info.Group)}
	if tp, ok := tp.(interface{ SpanLog() *dsotel.SpanLog }); ok {
		return loggedTracing(tp.SpanLog().Spans(instrumentationScope, name, trace.SpanKindConsumer, attrs...), prop, info)
	}
	return func(next Handler) Handler {
		return func(ctx context.Context, msg *Message) error {
			ctx, unsampled := carried(ctx, prop, msg)
			if unsampled {
				return next(ctx, msg)
			}
			ctx, span := tracer.Start(ctx, name, start...)
			recording := span.IsRecording()
			if recording {
				// One call: the SDK grows the span's attributes once, and
				// copies them, so the partition's slice serves the next message.
				all := append(msg.reuse.spanAttrs(attrs), dsotel.MessagingMessageIDKey.String(msg.ID))
				if msg.Attempt > 1 {
					all = append(all, dsotel.MessageAttemptKey.Int(msg.Attempt), dsotel.MessagingConsumerNameKey.String(info.Consumer))
				}
				span.SetAttributes(all...)
			}
			msg.ctx = ctx
			err := next(ctx, msg)
			if err != nil && recording {
				span.RecordError(err)
				span.SetStatus(codes.Error, err.Error())
				span.SetAttributes(dsotel.OutcomeKey.String(string(Classify(err))))
			}
			span.End()
			return err
		}
	}
}

// carried returns ctx with msg's trace context, and sets it as msg's;
// unsampled is true when that context's parent was not sampled, so the
// message gets no span.
func carried(ctx context.Context, prop propagation.TextMapPropagator, msg *Message) (_ context.Context, unsampled bool) {
	ctx = msg.reuse.extract(ctx, prop, msg)
	msg.ctx = ctx
	sc := trace.SpanContextFromContext(ctx)
	return ctx, sc.IsValid() && !sc.IsSampled()
}

// loggedTracing is tracing with a span log's spans, which the SDK's
// exporters and processors receive alike.
func loggedTracing(spans *dsotel.Spans, prop propagation.TextMapPropagator, info StageInfo) Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, msg *Message) error {
			ctx, unsampled := carried(ctx, prop, msg)
			if unsampled {
				return next(ctx, msg)
			}
			ctx, span := spans.Start(ctx)
			msg.ctx = ctx
			err := next(ctx, msg)
			if span == nil {
				return err
			}
			attrs := [4]attribute.KeyValue{dsotel.MessagingMessageIDKey.String(msg.ID)}
			n := 1
			if msg.Attempt > 1 {
				attrs[1], attrs[2] = dsotel.MessageAttemptKey.Int(msg.Attempt), dsotel.MessagingConsumerNameKey.String(info.Consumer)
				n = 3
			}
			if err != nil {
				attrs[n] = dsotel.OutcomeKey.String(string(Classify(err)))
				n++
			}
			span.Finish(err, attrs[:n]...)
			return err
		}
	}
}
