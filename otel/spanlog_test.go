package otel

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestSpanLogExportsAsSDK checks that a span log's span reaches the exporter
// and the processors as the SDK's span of the same calls does.
func TestSpanLogExportsAsSDK(t *testing.T) {
	exp := keptSpans{tracetest.NewInMemoryExporter()}
	res := resource.NewSchemaless(attribute.String("service.name", "t"))
	tp := NewTracerProvider(sdktrace.ParentBased(sdktrace.AlwaysSample()), res, exp)
	rec := tracetest.NewSpanRecorder()
	tp.RegisterSpanProcessor(rec)
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2},
		TraceFlags: trace.FlagsSampled, Remote: true})
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), parent)
	stage := []attribute.KeyValue{attribute.String("stage", "s")}
	boom := errors.New("boom")

	lctx, span := tp.SpanLog().Spans("scope", "process t", trace.SpanKindConsumer, stage...).Start(ctx)
	if span == nil || trace.SpanFromContext(lctx) != trace.Span(span) {
		t.Fatal("a sampled span was not started into its context")
	}
	_, child := tp.Tracer("x").Start(lctx, "child")
	child.End()
	span.SetAttributes(attribute.Int("handler", 1))
	span.Finish(boom, attribute.String("outcome", "failed"))

	_, sdk := tp.Tracer("scope").Start(ctx, "process t", trace.WithSpanKind(trace.SpanKindConsumer))
	sdk.SetAttributes(append(stage, attribute.Int("handler", 1))...)
	sdk.RecordError(boom)
	sdk.SetStatus(codes.Error, boom.Error())
	sdk.SetAttributes(attribute.String("outcome", "failed"))
	sdk.End()
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	spans := map[string]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		spans[s.SpanContext.SpanID().String()] = s
	}
	logged, want := spans[span.SpanContext().SpanID().String()], spans[sdk.SpanContext().SpanID().String()]
	if len(spans) != 3 || logged.Name == "" || want.Name == "" {
		t.Fatalf("exported %d spans, want the log's, the SDK's and the child", len(spans))
	}
	if c := spans[child.SpanContext().SpanID().String()]; c.Parent.SpanID() != span.SpanContext().SpanID() {
		t.Errorf("child's parent = %s, want the logged span", c.Parent.SpanID())
	}
	if logged.SpanContext.TraceID() != parent.TraceID() || !logged.Parent.Equal(want.Parent) {
		t.Errorf("parent = %v, want %v", logged.Parent, want.Parent)
	}
	if logged.Name != want.Name || logged.SpanKind != want.SpanKind || logged.Status != want.Status ||
		logged.InstrumentationScope != want.InstrumentationScope || !logged.Resource.Equal(want.Resource) {
		t.Errorf("logged %+v\nwant %+v", logged, want)
	}
	if !sameAttrs(logged.Attributes, want.Attributes) {
		t.Errorf("attributes %v, want %v", logged.Attributes, want.Attributes)
	}
	if len(logged.Events) != 1 || logged.Events[0].Name != want.Events[0].Name ||
		!sameAttrs(logged.Events[0].Attributes, want.Events[0].Attributes) {
		t.Errorf("events %v, want %v", logged.Events, want.Events)
	}
	if n := len(rec.Ended()); n != 3 {
		t.Errorf("processor saw %d spans, want 3", n)
	}
}

// keptSpans is an in-memory exporter whose spans outlive its shutdown.
type keptSpans struct{ *tracetest.InMemoryExporter }

func (keptSpans) Shutdown(context.Context) error { return nil }

func sameAttrs(a, b []attribute.KeyValue) bool {
	sa, sb := attribute.NewSet(a...), attribute.NewSet(b...)
	return sa.Equals(&sb)
}

// TestSpanLogSamples checks that an unsampled root gets a span context in
// its context but no recorded span.
func TestSpanLogSamples(t *testing.T) {
	exp := keptSpans{tracetest.NewInMemoryExporter()}
	tp := NewTracerProvider(sdktrace.ParentBased(sdktrace.NeverSample()), nil, exp)
	ctx, span := tp.SpanLog().Spans("scope", "process t", trace.SpanKindConsumer).Start(context.Background())
	if sc := trace.SpanContextFromContext(ctx); span != nil || !sc.IsValid() || sc.IsSampled() {
		t.Fatalf("span %v, context %v: want no span and an unsampled span context", span, sc)
	}
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(exp.GetSpans()); n != 0 {
		t.Errorf("exported %d spans, want 0", n)
	}
}

// TestSpanLogQueueBound checks that spans beyond a full queue are dropped
// and counted, and the queued ones exported at shutdown.
func TestSpanLogQueueBound(t *testing.T) {
	t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "2")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "3600000")
	exp := keptSpans{tracetest.NewInMemoryExporter()}
	tp := NewTracerProvider(sdktrace.AlwaysSample(), nil, exp)
	spans := tp.SpanLog().Spans("scope", "process t", trace.SpanKindConsumer)
	for range 3 {
		_, s := spans.Start(context.Background())
		s.Finish(nil)
	}
	if n := tp.SpanLog().Dropped(); n != 1 {
		t.Errorf("dropped %d, want 1", n)
	}
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(exp.GetSpans()); n != 2 {
		t.Errorf("exported %d spans, want 2", n)
	}
}

// Dropped is how many ended spans a full queue dropped.
func (l *SpanLog) Dropped() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dropped
}
