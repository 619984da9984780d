package stream

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestTracing_runOfOneTraceContextIsExtractedOnce hands the runner's own
// tracing middleware a partition's worth of messages, as the runner does
// (one traceReuse, one partition context), and checks that every message
// still gets its own producer's trace context, while a run of equal
// contexts shares one extraction.
func TestTracing_runOfOneTraceContextIsExtractedOnce(t *testing.T) {
	const (
		unsampledA = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
		unsampledB = "00-1bf7651916cd43dd8448eb211c80319d-c7ad6b7169203332-00"
		sampledC   = "00-2cf7651916cd43dd8448eb211c80319e-d7ad6b7169203333-01"
	)
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	var seen context.Context
	h := Chain(func(ctx context.Context, m *Message) error {
		seen = ctx
		return nil
	}, tracing(tp, prop, unitInfo))

	partition, other := context.WithCancel(context.Background())
	defer other()
	otherParent := context.WithValue(partition, unitKey{}, "other")
	var reuse traceReuse
	type step struct {
		name        string
		parent      context.Context
		traceParent string
		traceState  string
		baggage     string
		// sameAsBefore: the handler's context is the previous message's.
		sameAsBefore bool
	}
	steps := []step{
		{name: "first of a run", parent: partition, traceParent: unsampledA},
		{name: "same context again", parent: partition, traceParent: unsampledA, sameAsBefore: true},
		{name: "another trace", parent: partition, traceParent: unsampledB},
		{name: "back to the first", parent: partition, traceParent: unsampledA},
		{name: "same context under another parent", parent: otherParent, traceParent: unsampledA},
		{name: "with trace state", parent: otherParent, traceParent: unsampledA, traceState: "vendor=1"},
		{name: "with baggage", parent: otherParent, traceParent: unsampledA, baggage: "tenant=acme"},
		{name: "sampled", parent: partition, traceParent: sampledC},
		{name: "sampled again", parent: partition, traceParent: sampledC},
		{name: "no trace context", parent: partition},
	}
	var before context.Context
	for _, s := range steps {
		sr.Reset()
		m := &Message{ID: "1700000000000-1", Key: "k", Payload: []byte("ok"), Attempt: 1,
			TraceParent: s.traceParent, TraceState: s.traceState, reuse: &reuse}
		if s.baggage != "" {
			m.Metadata = map[string]string{"baggage": s.baggage}
		}
		if err := h(s.parent, m); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		got := trace.SpanContextFromContext(seen)
		if seen.Value(unitKey{}) != s.parent.Value(unitKey{}) {
			t.Errorf("%s: the handler's context does not derive from the caller's", s.name)
		}
		if (seen == before) != s.sameAsBefore {
			t.Errorf("%s: context shared with the message before: %v, want %v", s.name, seen == before, s.sameAsBefore)
		}
		before = seen
		switch {
		case s.traceParent == "":
			if len(sr.Ended()) != 1 || sr.Ended()[0].Parent().IsValid() {
				t.Errorf("%s: want one root span, got %v", s.name, sr.Ended())
			}
		case s.traceParent == sampledC:
			ended := sr.Ended()
			if len(ended) != 1 || ended[0].Parent().SpanID().String() != "d7ad6b7169203333" {
				t.Fatalf("%s: want one span, child of the message's producer; got %v", s.name, ended)
			}
			if !got.Equal(ended[0].SpanContext()) {
				t.Errorf("%s: handler span %v, want the consumer span", s.name, got)
			}
		default:
			want := "00-" + got.TraceID().String() + "-" + got.SpanID().String() + "-00"
			if want != s.traceParent || !got.IsRemote() || len(sr.Ended()) != 0 {
				t.Errorf("%s: handler has %s (remote %v, %d spans), want the unsampled parent %s passed through",
					s.name, want, got.IsRemote(), len(sr.Ended()), s.traceParent)
			}
			if st := got.TraceState().String(); st != s.traceState {
				t.Errorf("%s: trace state %q, want %q", s.name, st, s.traceState)
			}
			if b := baggage.FromContext(seen).String(); b != s.baggage {
				t.Errorf("%s: baggage %q, want %q", s.name, b, s.baggage)
			}
		}
	}
}

type unitKey struct{}
