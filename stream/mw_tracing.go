package stream

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/attribute"
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
//
// A message whose parent context says "not sampled" gets no span of its
// own unless recordUnsampled is set: the parent's context passes through
// to the handler unchanged, so logs keep the trace id and what the handler
// publishes carries the same unsampled parent on, as W3C Trace Context
// allows a participant that does not record. This is what a parent-based
// sampler would decide anyway, at none of the cost of starting a span that
// records nothing. Messages without a parent start a root span, which the
// provider's sampler decides.
func Tracing(tp trace.TracerProvider, prop propagation.TextMapPropagator, info StageInfo, recordUnsampled bool) Middleware {
	return tracing(tp, prop, info, recordUnsampled, false)
}

// tracing is Tracing; the runner's own copy, outermost in its chain and
// called with the partition's context, sets reuse to extract a run of
// entries with the same trace context once (see traceReuse).
func tracing(tp trace.TracerProvider, prop propagation.TextMapPropagator, info StageInfo, recordUnsampled, reuse bool) Middleware {
	tracer := tp.Tracer(instrumentationScope)
	name := "process " + info.Topic.String()
	// Only the kind is passed at start: the attributes are set when the
	// span records, as passing them would copy them for every message.
	start := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}
	attrs := []attribute.KeyValue{attrSystem, keyOperation.String("process"),
		keyDestination.String(info.Topic.String()), keyGroup.String(info.Group)}
	return func(next Handler) Handler {
		return func(ctx context.Context, msg *Message) error {
			if reuse {
				ctx = msg.reuse.extract(ctx, prop, msg)
			} else {
				ctx = ExtractTrace(ctx, prop, msg)
			}
			if !recordUnsampled {
				if sc := trace.SpanContextFromContext(ctx); sc.IsValid() && !sc.IsSampled() {
					msg.ctx = ctx
					return next(ctx, msg)
				}
			}
			ctx, span := tracer.Start(ctx, name, start...)
			recording := span.IsRecording()
			if recording {
				// One call: the SDK grows the span's attributes once, and
				// copies them, so the slice goes back to the pool.
				buf := spanAttrs.Get().(*[]attribute.KeyValue)
				all := append(append((*buf)[:0], attrs...), keyMessageID.String(msg.ID))
				if msg.Attempt > 1 {
					all = append(all, keyDeliveries.Int(msg.Attempt), keyConsumerName.String(info.Consumer))
				}
				span.SetAttributes(all...)
				clear(all)
				*buf = all[:0]
				spanAttrs.Put(buf)
			}
			msg.ctx = ctx
			err := next(ctx, msg)
			if err != nil && recording {
				span.RecordError(err)
				span.SetStatus(codes.Error, err.Error())
				span.SetAttributes(keyOutcome.String(string(Classify(err))))
			}
			span.End()
			return err
		}
	}
}

// spanAttrs holds the slices a recording span's attributes are gathered in.
var spanAttrs = sync.Pool{New: func() any {
	s := make([]attribute.KeyValue, 0, 8)
	return &s
}}
