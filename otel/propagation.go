package otel

import (
	"context"

	gotel "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
)

// FieldsCarrier adapts stream entry fields (the map[string]string the stream
// runtime keeps per entry) to propagation.TextMapCarrier. Keys are used
// exactly as given: no case folding, unlike propagation.HeaderCarrier.
type FieldsCarrier map[string]string

var _ propagation.TextMapCarrier = FieldsCarrier(nil)

// Get returns the value stored under key, or "" if absent.
func (c FieldsCarrier) Get(key string) string { return c[key] }

// Set stores value under key, replacing any previous value. c must not be
// nil.
func (c FieldsCarrier) Set(key, value string) { c[key] = value }

// Keys returns the keys present in c, in no particular order. It allocates;
// the TraceContext and Baggage propagators do not call it.
func (c FieldsCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// Inject writes the span context and baggage of ctx into fields using the
// global propagator (gotel.GetTextMapPropagator). With the propagator set by
// [Providers.SetGlobal] it writes "traceparent" and, when non-empty,
// "tracestate" and "baggage"; it writes nothing when ctx has no valid span
// context and no baggage. Until a global propagator is installed the global
// one is a no-op and Inject writes nothing.
//
// A nil fields is ignored (nothing is written) rather than panicking.
// Inject allocates the traceparent string and whatever growing fields
// needs; it is safe for concurrent use on distinct maps.
func Inject(ctx context.Context, fields map[string]string) {
	if fields == nil {
		return
	}
	gotel.GetTextMapPropagator().Inject(ctx, FieldsCarrier(fields))
}

// Extract returns a copy of ctx carrying the remote span context and baggage
// read from fields by the global propagator (gotel.GetTextMapPropagator).
// Missing or malformed fields leave ctx as it is, so a span started from the
// result becomes a new root. fields may be nil. It only reads fields.
//
// Like [Inject], it depends on a global propagator being installed, e.g. by
// [Providers.SetGlobal].
func Extract(ctx context.Context, fields map[string]string) context.Context {
	return gotel.GetTextMapPropagator().Extract(ctx, FieldsCarrier(fields))
}
