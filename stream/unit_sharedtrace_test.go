package stream

import (
	"context"
	"maps"
	"testing"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/trace"

	dsotel "github.com/dropstream/dropstream/otel"
)

// TestSharedTrace_injectsWhatInjectTraceDoes publishes runs of messages
// under one parent through a sharedTrace and checks that each message gets
// what InjectTrace gives it alone, whatever it carried before.
func TestSharedTrace_injectsWhatInjectTraceDoes(t *testing.T) {
	prop := dsotel.NewPropagator()
	ts, err := trace.ParseTraceState("vendor=1")
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled})
	member, err := baggage.NewMember("tenant", "t1")
	if err != nil {
		t.Fatal(err)
	}
	bag, err := baggage.New(member)
	if err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	span := trace.ContextWithSpanContext(bg, sc)
	// Each message as the run carries it before it is published.
	run := []Message{{}, {TraceState: "other=2"}, {TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"},
		{Metadata: map[string]string{"k": "v"}}, {}}
	for _, tc := range []struct {
		name   string
		parent context.Context
	}{
		{"a span", span},
		{"a span with a trace state", trace.ContextWithSpanContext(bg, sc.WithTraceState(ts))},
		{"a span and baggage", baggage.ContextWithBaggage(span, bag)},
		{"no span", bg},
		{"baggage alone", baggage.ContextWithBaggage(bg, bag)},
	} {
		for first := range run {
			// Each message of the run goes first once: the injection copied
			// is the first message's.
			shared := sharedTrace{parent: tc.parent}
			for i := range run {
				m := run[(first+i)%len(run)]
				m.Metadata = maps.Clone(m.Metadata)
				want := m
				want.Metadata = maps.Clone(m.Metadata)
				InjectTrace(tc.parent, prop, &want)
				shared.inject(prop, &m)
				if m.TraceParent != want.TraceParent || m.TraceState != want.TraceState || !maps.Equal(m.Metadata, want.Metadata) {
					t.Errorf("%s, run from message %d, message %d: traceparent %q, tracestate %q, metadata %v; want %q, %q, %v",
						tc.name, first, (first+i)%len(run), m.TraceParent, m.TraceState, m.Metadata, want.TraceParent, want.TraceState, want.Metadata)
				}
			}
		}
	}
}
