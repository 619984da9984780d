package stream

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
)

// traceReuse remembers the trace context one partition's consumer
// extracted last, so that a run of entries carrying the same trace context
// is extracted once. Such runs are the common case: a publish gives every
// message it sends the same parent, and a stage handling a message whose
// trace is not sampled passes that parent on unchanged, so a whole
// unsampled trace carries one traceparent from hop to hop. Extracting it
// means a parse and two allocations (the span context and the context
// holding it); reusing it costs a string comparison.
//
// The context returned for a reused entry is the one built for the first
// entry of the run. That is safe because contexts are immutable and the
// parent is the same: the cached context is reused only when the caller's
// context is the very one it was derived from.
//
// Only the runner's own telemetry uses it, with the partition's context
// (a *cancelCtx, so the comparison below cannot panic), and only the
// partition's goroutine touches it.
type traceReuse struct {
	parent      context.Context
	traceParent string
	ctx         context.Context
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
	*c = traceReuse{parent: ctx, traceParent: m.TraceParent, ctx: out}
	return out
}
