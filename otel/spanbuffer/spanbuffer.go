// Package spanbuffer keeps the last traces a process recorded, bounded, so
// a console can show them without an external trace store. Buffer is an
// OpenTelemetry SDK SpanProcessor: register it on the tracer provider.
package spanbuffer

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/dropstream/dropstream/internal/clip"
)

// Defaults of Config.
const (
	DefaultTraces        = 100
	DefaultSpansPerTrace = 200
	// maxAttrs bounds the attributes kept per span.
	maxAttrs = 24
	// maxValueLen bounds an attribute value kept.
	maxValueLen = 256
)

// Config bounds a Buffer. Zero fields take their defaults.
type Config struct {
	// Traces is how many traces are kept, the newest. Default 100.
	Traces int
	// SpansPerTrace is how many spans are kept per trace, the first
	// ended. Default 200.
	SpansPerTrace int
	// Ignore, when set, drops the spans it answers true for (the
	// console's own requests, say).
	Ignore func(name string) bool
}

// Span is an ended span as kept.
type Span struct {
	TraceID  string            `json:"trace_id"`
	SpanID   string            `json:"span_id"`
	ParentID string            `json:"parent_id,omitempty"`
	Name     string            `json:"name"`
	Kind     string            `json:"kind"`
	Service  string            `json:"service,omitempty"`
	Start    time.Time         `json:"start"`
	End      time.Time         `json:"end"`
	Error    string            `json:"error,omitempty"`
	Attrs    map[string]string `json:"attrs,omitempty"`
	Links    []Link            `json:"links,omitempty"`
}

// Link is a span link: the span this one follows from (a message's
// producer, for a batch).
type Link struct {
	TraceID string `json:"trace_id"`
	SpanID  string `json:"span_id"`
}

// Summary describes a kept trace.
type Summary struct {
	TraceID string    `json:"trace_id"`
	Root    string    `json:"root"`
	Start   time.Time `json:"start"`
	// DurationMs spans the first start to the last end of its kept spans.
	DurationMs float64 `json:"duration_ms"`
	Spans      int     `json:"spans"`
	Errors     int     `json:"errors"`
}

// kept is a trace's spans as the SDK ended them: they are converted to
// Span only when read, so that keeping a span costs an append.
type kept struct {
	id    trace.TraceID
	spans []sdktrace.ReadOnlySpan
}

// Buffer keeps the newest traces. Safe for concurrent use.
type Buffer struct {
	cfg    Config
	mu     sync.Mutex                       // of the kept spans
	traces *lru.Cache[trace.TraceID, *kept] // oldest first
}

var _ sdktrace.SpanProcessor = (*Buffer)(nil)

// New returns an empty buffer.
func New(cfg Config) *Buffer {
	cfg.Traces = cmp.Or(max(cfg.Traces, 0), DefaultTraces)
	cfg.SpansPerTrace = cmp.Or(max(cfg.SpansPerTrace, 0), DefaultSpansPerTrace)
	traces, _ := lru.New[trace.TraceID, *kept](cfg.Traces) // fails only for a size below 1
	return &Buffer{cfg: cfg, traces: traces}
}

// OnStart does nothing: spans are kept when they end.
func (b *Buffer) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd keeps a sampled span in its trace, evicting the oldest trace when
// the buffer is full.
func (b *Buffer) OnEnd(s sdktrace.ReadOnlySpan) {
	sc := s.SpanContext()
	if !sc.IsSampled() || (b.cfg.Ignore != nil && b.cfg.Ignore(s.Name())) {
		return
	}
	id := sc.TraceID()
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.traces.Peek(id)
	if !ok {
		t = &kept{id: id}
		b.traces.Add(id, t) // evicts the oldest trace of a full buffer
	}
	if len(t.spans) < b.cfg.SpansPerTrace {
		t.spans = append(t.spans, s)
	}
}

// toSpan converts an ended span to a Span.
func toSpan(s sdktrace.ReadOnlySpan) Span {
	sc := s.SpanContext()
	sp := Span{TraceID: sc.TraceID().String(), SpanID: sc.SpanID().String(), Name: s.Name(), Kind: s.SpanKind().String(),
		Start: s.StartTime(), End: s.EndTime(), Error: spanError(s)}
	if p := s.Parent(); p.IsValid() {
		sp.ParentID = p.SpanID().String()
	}
	if r := s.Resource(); r != nil {
		if v, ok := r.Set().Value("service.name"); ok {
			sp.Service = v.String()
		}
	}
	attrs := s.Attributes()
	for _, kv := range attrs[:min(len(attrs), maxAttrs)] {
		if sp.Attrs == nil {
			sp.Attrs = map[string]string{}
		}
		sp.Attrs[string(kv.Key)] = clip.String(kv.Value.String(), maxValueLen)
	}
	for _, l := range s.Links() {
		sp.Links = append(sp.Links, Link{TraceID: l.SpanContext.TraceID().String(), SpanID: l.SpanContext.SpanID().String()})
	}
	return sp
}

// spanError is the span's error status description, "error" when it has
// none, or empty when the span did not fail.
func spanError(s sdktrace.ReadOnlySpan) string {
	if st := s.Status(); st.Code == codes.Error {
		return cmp.Or(clip.String(st.Description, maxValueLen), "error")
	}
	return ""
}

// Shutdown does nothing.
func (b *Buffer) Shutdown(context.Context) error { return nil }

// ForceFlush does nothing.
func (b *Buffer) ForceFlush(context.Context) error { return nil }

// Traces returns the kept traces, newest first.
func (b *Buffer) Traces() []Summary {
	b.mu.Lock()
	defer b.mu.Unlock()
	traces := b.traces.Values()
	out := make([]Summary, 0, len(traces))
	for i := len(traces) - 1; i >= 0; i-- {
		out = append(out, summarize(traces[i]))
	}
	return out
}

// Trace returns a kept trace's spans, by start time, and false when it is
// not kept.
func (b *Buffer) Trace(id string) ([]Span, bool) {
	tid, err := trace.TraceIDFromHex(id)
	if err != nil {
		return nil, false
	}
	b.mu.Lock()
	t, ok := b.traces.Peek(tid)
	var ended []sdktrace.ReadOnlySpan
	if ok {
		ended = slices.Clone(t.spans)
	}
	b.mu.Unlock()
	spans := make([]Span, 0, len(ended))
	for _, s := range ended {
		spans = append(spans, toSpan(s))
	}
	slices.SortStableFunc(spans, func(a, b Span) int { return a.Start.Compare(b.Start) })
	return spans, ok
}

func summarize(t *kept) Summary {
	s := Summary{TraceID: t.id.String(), Spans: len(t.spans)}
	var end time.Time
	ids := map[trace.SpanID]bool{}
	for _, sp := range t.spans {
		ids[sp.SpanContext().SpanID()] = true
	}
	for _, sp := range t.spans {
		if start := sp.StartTime(); s.Start.IsZero() || start.Before(s.Start) {
			s.Start = start
		}
		if e := sp.EndTime(); e.After(end) {
			end = e
		}
		if sp.Status().Code == codes.Error {
			s.Errors++
		}
		if p := sp.Parent(); s.Root == "" && (!p.IsValid() || !ids[p.SpanID()]) {
			s.Root = sp.Name()
		}
	}
	s.DurationMs = float64(end.Sub(s.Start).Microseconds()) / 1000
	return s
}
