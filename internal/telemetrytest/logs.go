package telemetrytest

import (
	"context"
	"log/slog"
	"sync"
)

// Logs is a slog.Handler that keeps the records at Info and above for a
// test to read, and passes every record on to Next when set (and enabled
// there). Attributes added by WithAttrs or groups are not kept.
type Logs struct {
	Next slog.Handler

	mu   sync.Mutex
	recs []Record
}

// Record is a kept log record.
type Record struct {
	Msg   string
	Level slog.Level
	Attrs map[string]any // attribute key → slog.Value.Any()
}

// Enabled implements slog.Handler.
func (l *Logs) Enabled(context.Context, slog.Level) bool { return true }

// Handle implements slog.Handler.
func (l *Logs) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelInfo {
		rec := Record{Msg: r.Message, Level: r.Level, Attrs: map[string]any{}}
		r.Attrs(func(a slog.Attr) bool { rec.Attrs[a.Key] = a.Value.Any(); return true })
		l.mu.Lock()
		l.recs = append(l.recs, rec)
		l.mu.Unlock()
	}
	if l.Next != nil && l.Next.Enabled(ctx, r.Level) {
		return l.Next.Handle(ctx, r)
	}
	return nil
}

// WithAttrs implements slog.Handler.
func (l *Logs) WithAttrs([]slog.Attr) slog.Handler { return l }

// WithGroup implements slog.Handler.
func (l *Logs) WithGroup(string) slog.Handler { return l }

// Records returns the records kept so far.
func (l *Logs) Records() []Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Record(nil), l.recs...)
}

// Count returns how many kept records have message msg and, for each key
// of attrs, an attribute of that key whose value prints as attrs[key].
func (l *Logs) Count(msg string, attrs map[string]string) int {
	n := 0
	for _, r := range l.Records() {
		if r.Msg != msg {
			continue
		}
		ok := true
		for k, v := range attrs {
			ok = ok && r.Attrs[k] != nil && slog.AnyValue(r.Attrs[k]).String() == v
		}
		if ok {
			n++
		}
	}
	return n
}
