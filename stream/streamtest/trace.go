package streamtest

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

func testTracePropagation(t *testing.T, b Backend) {
	rdb := b.Client(t)
	first, second := newTopic(2), newTopic(2)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tel := stream.Telemetry{TracerProvider: tp, Propagator: propagation.TraceContext{}}
	pub := stream.NewPublisher(rdb, tel)
	done := make(chan trace.SpanContext, 1)
	start(t, rdb, stream.Stage{Name: "hop1", Topic: first, Config: fastConfig(),
		Handler: func(ctx context.Context, m *stream.Message) error {
			out := stream.NewMessage(m.Key, "test.out", m.Payload)
			return pub.Publish(ctx, second, out)
		}}, tel)
	start(t, rdb, stream.Stage{Name: "hop2", Topic: second, Config: fastConfig(),
		Handler: func(ctx context.Context, m *stream.Message) error {
			done <- trace.SpanContextFromContext(ctx)
			return nil
		}}, tel)
	ctx, root := tp.Tracer("test").Start(context.Background(), "poll")
	if err := pub.Publish(ctx, first, stream.NewMessage("venue-1", "test.in", []byte("x"))); err != nil {
		t.Fatal(err)
	}
	root.End()
	last := <-done
	if last.TraceID() != root.SpanContext().TraceID() {
		t.Fatalf("second hop trace %s, want the root's %s", last.TraceID(), root.SpanContext().TraceID())
	}
	testenv.WaitFor(t, waitTimeout, func() bool { return len(rec.Ended()) >= 5 }, "want 5 ended spans")
	spans := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		spans[s.Name()] = s
		if s.SpanContext().TraceID() != root.SpanContext().TraceID() {
			t.Errorf("span %q in trace %s, want %s", s.Name(), s.SpanContext().TraceID(), root.SpanContext().TraceID())
		}
	}
	chain := []struct{ name, parent string }{
		{"send " + first.String(), "poll"},
		{"process " + first.String(), "send " + first.String()},
		{"send " + second.String(), "process " + first.String()},
		{"process " + second.String(), "send " + second.String()},
	}
	for _, c := range chain {
		s, ok := spans[c.name]
		if !ok {
			t.Errorf("no span %q", c.name)
			continue
		}
		if p := spans[c.parent]; p == nil || s.Parent().SpanID() != p.SpanContext().SpanID() {
			t.Errorf("span %q: parent is not %q", c.name, c.parent)
		}
	}
	if s := spans["process "+second.String()]; s != nil {
		attrs := map[string]string{}
		for _, kv := range s.Attributes() {
			attrs[string(kv.Key)] = kv.Value.String()
		}
		for k, v := range map[string]string{"messaging.system": "redis", "messaging.operation.type": "process",
			"messaging.consumer.group.name": "hop2", "messaging.destination.name": second.String()} {
			if attrs[k] != v {
				t.Errorf("process span attribute %s = %q, want %q", k, attrs[k], v)
			}
		}
		if s.SpanKind() != trace.SpanKindConsumer {
			t.Errorf("process span kind %v, want consumer", s.SpanKind())
		}
	}
}
