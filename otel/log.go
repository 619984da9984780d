package otel

import (
	"context"
	"io"
	"log/slog"
	"slices"

	"go.opentelemetry.io/otel/trace"
)

// Log attribute keys added by the handler of [NewLogHandler].
const (
	// LogTraceIDKey holds the 32-hex-digit trace id.
	LogTraceIDKey = "trace_id"
	// LogSpanIDKey holds the 16-hex-digit span id.
	LogSpanIDKey = "span_id"
)

// Log formats accepted by [LogConfig].
const (
	LogFormatJSON = "json"
	LogFormatText = "text"
)

// LogConfig configures [NewLogger]. The zero value logs JSON at Info.
type LogConfig struct {
	// Format is "json" (the default) or "text"; any other value means JSON.
	Format string
	// Level is the minimum level logged (default Info).
	Level slog.Level
}

// NewLogger returns a logger writing to w in cfg's format and level, with
// trace_id and span_id added as by [NewLogHandler].
func NewLogger(w io.Writer, cfg LogConfig) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.Level}
	if cfg.Format == LogFormatText {
		return slog.New(NewLogHandler(slog.NewTextHandler(w, opts)))
	}
	return slog.New(NewLogHandler(slog.NewJSONHandler(w, opts)))
}

// NewLogHandler wraps inner: a record whose context holds a valid span gets
// trace_id and span_id at its top level, even under WithGroup. A record
// with a trace_id of its own keeps it. Log with the context-taking methods
// (InfoContext, ...) for the span to be seen.
func NewLogHandler(inner slog.Handler) slog.Handler {
	return &logHandler{base: inner, full: inner}
}

// logHandler keeps two views of the wrapped handler:
//   - full has every WithAttrs/WithGroup applied and serves records without
//     a span, so inner handlers keep their pre-formatting;
//   - base has only the attributes added before the first group, and groups
//     holds the rest; records with a span are rebuilt on base so that
//     trace_id and span_id stay outside the groups.
type logHandler struct {
	base   slog.Handler
	full   slog.Handler
	groups []logGroup
}

// logGroup is a WithGroup name with the attributes added inside it.
type logGroup struct {
	name  string
	attrs []slog.Attr
}

func (h *logHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.full.Enabled(ctx, level)
}

func (h *logHandler) Handle(ctx context.Context, r slog.Record) error {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return h.full.Handle(ctx, r)
	}
	ids := []slog.Attr{
		slog.String(LogTraceIDKey, sc.TraceID().String()),
		slog.String(LogSpanIDKey, sc.SpanID().String()),
	}
	if len(h.groups) == 0 && hasTraceID(r) {
		ids = ids[1:] // the record's own trace_id stays, alone
	}
	if len(h.groups) == 0 {
		// Clone so that appending cannot write into an array shared with
		// the caller's Record.
		r = r.Clone()
		r.AddAttrs(ids...)
		return h.full.Handle(ctx, r)
	}

	// Rebuild the record: ids at the top, then the open groups with
	// their attributes, the record's own attributes innermost.
	nested := make([]slog.Attr, 0, r.NumAttrs())
	r.Attrs(func(a slog.Attr) bool {
		nested = append(nested, a)
		return true
	})
	for i := len(h.groups) - 1; i >= 0; i-- {
		g := h.groups[i]
		nested = []slog.Attr{{Key: g.name, Value: slog.GroupValue(slices.Concat(g.attrs, nested)...)}}
	}
	nr := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	nr.AddAttrs(ids...)
	nr.AddAttrs(nested...)
	return h.base.Handle(ctx, nr)
}

func (h *logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	n := &logHandler{base: h.base, full: h.full.WithAttrs(attrs)}
	if len(h.groups) == 0 {
		n.base = n.full
		return n
	}
	n.groups = slices.Clone(h.groups)
	last := &n.groups[len(n.groups)-1]
	last.attrs = append(slices.Clip(last.attrs), attrs...)
	return n
}

func (h *logHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &logHandler{
		base:   h.base,
		full:   h.full.WithGroup(name),
		groups: append(slices.Clip(h.groups), logGroup{name: name}),
	}
}

// hasTraceID reports whether r carries a top-level trace_id attribute.
func hasTraceID(r slog.Record) bool {
	found := false
	r.Attrs(func(a slog.Attr) bool {
		found = a.Key == LogTraceIDKey
		return !found
	})
	return found
}
