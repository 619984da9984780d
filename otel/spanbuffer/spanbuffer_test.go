package spanbuffer

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/dropstream/dropstream/internal/benchstat"
)

func TestBuffer_keepsTheNewestTracesWithTheirSpansAndLinks(t *testing.T) {
	buf := New(Config{Traces: 2, SpansPerTrace: 3, Ignore: func(name string) bool { return strings.HasPrefix(name, "GET /console") }})
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(buf))
	tr := tp.Tracer("test")
	ctx := context.Background()
	var ids []string
	var first trace.SpanContext
	for i := range 3 {
		rctx, root := tr.Start(ctx, "root")
		opts := []trace.SpanStartOption{}
		if i == 2 {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: first}))
		}
		for range 4 {
			_, child := tr.Start(rctx, "child", opts...)
			child.End()
		}
		root.End()
		if i == 0 {
			first = root.SpanContext()
		}
		ids = append(ids, root.SpanContext().TraceID().String())
	}
	_, ignored := tr.Start(ctx, "GET /console/app.js")
	ignored.End()

	got := buf.Traces()
	if len(got) != 2 || got[0].TraceID != ids[2] || got[1].TraceID != ids[1] {
		t.Fatalf("traces %+v, want the two newest, newest first", got)
	}
	if _, ok := buf.Trace(ids[0]); ok {
		t.Error("the oldest trace is still kept")
	}
	spans, ok := buf.Trace(ids[2])
	if !ok || len(spans) != 3 {
		t.Fatalf("newest trace has %d spans, want 3 (the bound)", len(spans))
	}
	if len(spans[0].Links) != 1 || spans[0].Links[0].TraceID != ids[0] || spans[0].ParentID == "" {
		t.Errorf("span %+v: want a child linked to the first trace", spans[0])
	}
}

// BenchmarkBuffer_OnEnd measures keeping a consumer span with five
// attributes, in CPU time per span (steadier than wall time on a shared
// machine); "none" is the span without a buffer.
func BenchmarkBuffer_OnEnd(b *testing.B) {
	attrs := []attribute.KeyValue{attribute.String("messaging.system", "redis"), attribute.String("messaging.operation.type", "process"),
		attribute.String("messaging.destination.name", "t"), attribute.String("messaging.consumer.group.name", "g"),
		attribute.String("messaging.message.id", "1700000000000-1")}
	for _, buffered := range []bool{false, true} {
		b.Run(map[bool]string{false: "none", true: "buffer"}[buffered], func(b *testing.B) {
			var opts []sdktrace.TracerProviderOption
			if buffered {
				opts = append(opts, sdktrace.WithSpanProcessor(New(Config{})))
			}
			tr, ctx := sdktrace.NewTracerProvider(opts...).Tracer("b"), context.Background()
			b.ReportAllocs()
			cpu := benchstat.ProcessCPU()
			for b.Loop() {
				_, span := tr.Start(ctx, "process t")
				span.SetAttributes(attrs...)
				span.End()
			}
			b.ReportMetric(float64((benchstat.ProcessCPU()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}
