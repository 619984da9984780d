package stream

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
)

// traceReuse remembers the trace context a partition extracted last, so a
// run of entries with one traceparent is extracted once. The cached context
// is reused only under the parent it was derived from, and only the
// partition's goroutine touches it.
type traceReuse struct {
	parent      context.Context
	traceParent string
	ctx         context.Context
	// attrs starts with the stage's span attributes; each recording span
	// appends its message's after them (see spanAttrs).
	attrs []attribute.KeyValue
}

// extract is ExtractTrace(ctx, p, m), reusing the last result when m
// carries the same traceparent as the entry before (and nothing else a
// propagator reads) and ctx is the same parent. A nil traceReuse always
// extracts.
func (c *traceReuse) extract(ctx context.Context, p propagation.TextMapPropagator, m *Message) context.Context {
	if c == nil || m.TraceParent == "" || m.TraceState != "" || len(m.Metadata) != 0 {
		return ExtractTrace(ctx, p, m)
	}
	if c.ctx != nil && c.parent == ctx && c.traceParent == m.TraceParent {
		return c.ctx
	}
	out := ExtractTrace(ctx, p, m)
	c.parent, c.traceParent, c.ctx = ctx, m.TraceParent, out
	return out
}

// spanAttrs returns stage, the stage's span attributes, with room to append
// a message's: the partition's own slice, built once, or a new one when c
// is nil. The stage's are never overwritten, so they are not copied again.
func (c *traceReuse) spanAttrs(stage []attribute.KeyValue) []attribute.KeyValue {
	if c == nil {
		return append(make([]attribute.KeyValue, 0, len(stage)+3), stage...)
	}
	if c.attrs == nil {
		c.attrs = append(make([]attribute.KeyValue, 0, len(stage)+3), stage...)
	}
	return c.attrs[:len(stage)]
}
