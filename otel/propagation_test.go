package otel

import (
	"context"
	"testing"

	gotel "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// useGlobalPropagator installs NewPropagator globally for the test.
func useGlobalPropagator(tb testing.TB) {
	tb.Helper()
	prev := gotel.GetTextMapPropagator()
	gotel.SetTextMapPropagator(NewPropagator())
	tb.Cleanup(func() { gotel.SetTextMapPropagator(prev) })
}

func mustSpanContext(tb testing.TB, flags trace.TraceFlags, state string) trace.SpanContext {
	tb.Helper()
	ts, err := trace.ParseTraceState(state)
	if err != nil {
		tb.Fatal(err)
	}
	return trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: flags,
		TraceState: ts,
	})
}

// tenantBaggage is a baggage of one member, tenant=acme.
func tenantBaggage(tb testing.TB) baggage.Baggage {
	tb.Helper()
	member, err := baggage.NewMember("tenant", "acme")
	if err != nil {
		tb.Fatal(err)
	}
	bag, err := baggage.New(member)
	if err != nil {
		tb.Fatal(err)
	}
	return bag
}

func TestInjectExtract_roundTrip(t *testing.T) {
	useGlobalPropagator(t)
	bag := tenantBaggage(t)

	tests := []struct {
		name       string
		sc         trace.SpanContext
		bag        baggage.Baggage
		wantFields []string
	}{
		{name: "sampled", sc: mustSpanContext(t, trace.FlagsSampled, ""), wantFields: []string{FieldTraceparent}},
		{name: "not sampled", sc: mustSpanContext(t, 0, ""), wantFields: []string{FieldTraceparent}},
		{name: "tracestate", sc: mustSpanContext(t, trace.FlagsSampled, "ds=1,other=x"), wantFields: []string{FieldTraceparent, FieldTracestate}},
		{name: "baggage", sc: mustSpanContext(t, trace.FlagsSampled, ""), bag: bag, wantFields: []string{FieldTraceparent, FieldBaggage}},
		{name: "no span", wantFields: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := trace.ContextWithSpanContext(context.Background(), tt.sc)
			ctx = baggage.ContextWithBaggage(ctx, tt.bag)
			fields := map[string]string{"payload": "x"}
			Inject(ctx, fields)

			if len(fields) != 1+len(tt.wantFields) {
				t.Errorf("fields after Inject = %v, want payload + %v", fields, tt.wantFields)
			}
			for _, f := range tt.wantFields {
				if fields[f] == "" {
					t.Errorf("field %q missing: %v", f, fields)
				}
			}

			got := Extract(context.Background(), fields)
			gotSC := trace.SpanContextFromContext(got)
			if gotSC.TraceID() != tt.sc.TraceID() || gotSC.SpanID() != tt.sc.SpanID() ||
				gotSC.IsSampled() != tt.sc.IsSampled() || gotSC.TraceState().String() != tt.sc.TraceState().String() {
				t.Errorf("extracted %v, want %v", gotSC, tt.sc)
			}
			if tt.sc.IsValid() && !gotSC.IsRemote() {
				t.Error("extracted span context is not remote")
			}
			if g, w := baggage.FromContext(got).String(), tt.bag.String(); g != w {
				t.Errorf("baggage = %q, want %q", g, w)
			}
		})
	}
}

func TestExtract_invalidFieldsKeepContext(t *testing.T) {
	useGlobalPropagator(t)
	tests := []struct {
		name   string
		fields map[string]string
	}{
		{"nil map", nil},
		{"empty", map[string]string{}},
		{"garbage", map[string]string{FieldTraceparent: "not-a-traceparent"}},
		{"upper case hex", map[string]string{FieldTraceparent: "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01"}},
		{"zero trace id", map[string]string{FieldTraceparent: "00-00000000000000000000000000000000-00f067aa0ba902b7-01"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := context.Background()
			if got := Extract(parent, tt.fields); got != parent {
				t.Errorf("Extract changed the context: %v", trace.SpanContextFromContext(got))
			}
		})
	}
}

func TestInject_nilFieldsIgnored(t *testing.T) {
	useGlobalPropagator(t)
	ctx := trace.ContextWithSpanContext(context.Background(), mustSpanContext(t, trace.FlagsSampled, ""))
	Inject(ctx, nil) // must not panic
}

func TestFieldsCarrier_textMapCarrier(t *testing.T) {
	c := FieldsCarrier{}
	var carrier propagation.TextMapCarrier = c
	carrier.Set(FieldTraceparent, "v")
	if got := carrier.Get(FieldTraceparent); got != "v" {
		t.Errorf("Get = %q, want v", got)
	}
	if got := carrier.Get("Traceparent"); got != "" {
		t.Errorf("Get is case-folding: %q", got)
	}
	if keys := carrier.Keys(); len(keys) != 1 || keys[0] != FieldTraceparent {
		t.Errorf("Keys = %v", keys)
	}
}

// BenchmarkInjectExtract measures one hop: a producer injects into fresh
// entry fields and a consumer extracts them.
func BenchmarkInjectExtract(b *testing.B) {
	useGlobalPropagator(b)
	ctx := trace.ContextWithSpanContext(context.Background(), mustSpanContext(b, trace.FlagsSampled, ""))
	bg := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		fields := make(map[string]string, 4)
		fields["payload"] = "x"
		Inject(ctx, fields)
		if !trace.SpanContextFromContext(Extract(bg, fields)).IsValid() {
			b.Fatal("lost span context")
		}
	}
}

func BenchmarkInject(b *testing.B) {
	useGlobalPropagator(b)
	ctx := trace.ContextWithSpanContext(context.Background(), mustSpanContext(b, trace.FlagsSampled, ""))
	fields := make(map[string]string, 4)
	b.ReportAllocs()
	for b.Loop() {
		Inject(ctx, fields)
	}
}

func BenchmarkExtract(b *testing.B) {
	useGlobalPropagator(b)
	ctx := trace.ContextWithSpanContext(context.Background(), mustSpanContext(b, trace.FlagsSampled, ""))
	fields := make(map[string]string, 4)
	Inject(ctx, fields)
	bg := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_ = Extract(bg, fields)
	}
}

func BenchmarkExtract_noFields(b *testing.B) {
	useGlobalPropagator(b)
	fields := map[string]string{"payload": "x"}
	bg := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_ = Extract(bg, fields)
	}
}
