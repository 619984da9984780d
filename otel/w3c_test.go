package otel

import (
	"context"
	"maps"
	"testing"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// standard is the composite the hand-written propagator must match.
var standard = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

const validParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// traceParents are the valid header, and every single-character change of
// it to a character that is significant somewhere in the format, plus
// headers of other lengths and versions.
func traceParents() []string {
	out := []string{"", validParent, validParent + "-extra", validParent[:54], "01" + validParent[2:] + "-extra",
		"ff" + validParent[2:], "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"}
	for i := range len(validParent) {
		for _, c := range "0179afAFg-x " {
			b := []byte(validParent)
			b[i] = byte(c)
			out = append(out, string(b))
		}
	}
	return out
}

func TestPropagator_extractsWhatTheStandardPropagatorsDo(t *testing.T) {
	states := []string{"", "vendor=value", "bad state,,="}
	bags := []string{"", "tenant=acme", "not a baggage;;"}
	for _, tp := range traceParents() {
		for _, ts := range states {
			for _, bg := range bags {
				carrier := propagation.MapCarrier{}
				for k, v := range map[string]string{"traceparent": tp, "tracestate": ts, "baggage": bg} {
					if v != "" {
						carrier[k] = v
					}
				}
				got := NewPropagator().Extract(context.Background(), carrier)
				want := standard.Extract(context.Background(), carrier)
				gsc, wsc := trace.SpanContextFromContext(got), trace.SpanContextFromContext(want)
				if !gsc.Equal(wsc) || gsc.IsRemote() != wsc.IsRemote() {
					t.Errorf("Extract(%q, %q) = %v remote %v; standard %v remote %v", tp, ts, gsc, gsc.IsRemote(), wsc, wsc.IsRemote())
				}
				if g, w := baggage.FromContext(got).String(), baggage.FromContext(want).String(); g != w {
					t.Errorf("Extract baggage %q = %q; standard %q", bg, g, w)
				}
			}
		}
	}
}

func TestPropagator_injectsWhatTheStandardPropagatorsDo(t *testing.T) {
	bag := tenantBaggage(t)
	ctxs := map[string]context.Context{"empty": context.Background()}
	for _, flags := range []trace.TraceFlags{0, trace.FlagsSampled, trace.FlagsSampled | trace.FlagsRandom, 0xff} {
		for _, state := range []string{"", "vendor=value"} {
			ctx := trace.ContextWithSpanContext(context.Background(), mustSpanContext(t, flags, state))
			ctxs["flags "+flags.String()+" state "+state] = ctx
			ctxs["flags "+flags.String()+" state "+state+" baggage"] = baggage.ContextWithBaggage(ctx, bag)
		}
	}
	ctxs["baggage alone"] = baggage.ContextWithBaggage(context.Background(), bag)
	for name, ctx := range ctxs {
		got, want := propagation.MapCarrier{}, propagation.MapCarrier{}
		NewPropagator().Inject(ctx, got)
		standard.Inject(ctx, want)
		if !maps.Equal(got, want) {
			t.Errorf("%s: Inject = %v; standard %v", name, got, want)
		}
	}
	if got, want := NewPropagator().Fields(), standard.Fields(); !equalSets(got, want) {
		t.Errorf("Fields = %v; standard %v", got, want)
	}
}

func equalSets(a, b []string) bool {
	in := map[string]bool{}
	for _, x := range a {
		in[x] = true
	}
	for _, x := range b {
		if !in[x] {
			return false
		}
		delete(in, x)
	}
	return len(in) == 0
}

// BenchmarkPropagator_extractTraceParent compares the two on a lone
// traceparent, the runtime's per-message case.
func BenchmarkPropagator_extractTraceParent(b *testing.B) {
	carrier := propagation.MapCarrier{"traceparent": validParent}
	for name, p := range map[string]propagation.TextMapPropagator{"dropstream": NewPropagator(), "standard": standard} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !trace.SpanContextFromContext(p.Extract(context.Background(), carrier)).IsValid() {
					b.Fatal("no span context")
				}
			}
		})
	}
}
