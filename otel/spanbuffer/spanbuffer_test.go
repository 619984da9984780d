package spanbuffer

import (
	"context"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
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
