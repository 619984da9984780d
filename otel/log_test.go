package otel

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"testing/slogtest"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// startSpan starts a recording span of a real tracer provider, ended with
// the test.
func startSpan(t *testing.T) (context.Context, trace.Span) {
	t.Helper()
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer(ScopeName).Start(context.Background(), "op")
	t.Cleanup(func() {
		span.End()
		_ = tp.Shutdown(context.Background())
	})
	return ctx, span
}

// decodeLines parses JSON log lines, dropping time, level and msg.
func decodeLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		delete(m, slog.TimeKey)
		delete(m, slog.LevelKey)
		delete(m, slog.MessageKey)
		out = append(out, m)
	}
	return out
}

func TestLogHandler_addsIDsOfRealSpan(t *testing.T) {
	ctx, span := startSpan(t)

	var buf bytes.Buffer
	log := NewLogger(&buf, LogConfig{})
	log.InfoContext(ctx, "with span")
	log.InfoContext(context.Background(), "without span")
	log.Info("no context")

	lines := decodeLines(t, &buf)
	if len(lines) != 3 {
		t.Fatalf("got %d lines, want 3", len(lines))
	}
	want := map[string]any{
		LogTraceIDKey: span.SpanContext().TraceID().String(),
		LogSpanIDKey:  span.SpanContext().SpanID().String(),
	}
	if !reflect.DeepEqual(lines[0], want) {
		t.Errorf("with span: %v, want %v", lines[0], want)
	}
	for _, l := range lines[1:] {
		if len(l) != 0 {
			t.Errorf("without span: unexpected attributes %v", l)
		}
	}
}

// TestLogHandler_keepsARecordsOwnTraceID: a record that carries trace_id
// itself (an access log written for plain handlers too) is not given a
// second one; it still gets span_id.
func TestLogHandler_keepsARecordsOwnTraceID(t *testing.T) {
	ctx, span := startSpan(t)

	var buf bytes.Buffer
	log := NewLogger(&buf, LogConfig{})
	log.InfoContext(ctx, "own id", LogTraceIDKey, "mine")
	if n := strings.Count(buf.String(), `"`+LogTraceIDKey+`"`); n != 1 {
		t.Fatalf("record %s holds trace_id %d times, want once", buf.String(), n)
	}
	lines := decodeLines(t, &buf)
	if lines[0][LogTraceIDKey] != "mine" || lines[0][LogSpanIDKey] != span.SpanContext().SpanID().String() {
		t.Fatalf("record %v, want its own trace_id and the span's span_id", lines[0])
	}
}

func TestLogHandler_withAttrsAndGroups(t *testing.T) {
	sc := sampledSpanContext()
	traced := trace.ContextWithSpanContext(context.Background(), sc)
	ids := map[string]any{LogTraceIDKey: sc.TraceID().String(), LogSpanIDKey: sc.SpanID().String()}
	withIDs := func(m map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range m {
			out[k] = v
		}
		for k, v := range ids {
			out[k] = v
		}
		return out
	}

	tests := []struct {
		name   string
		derive func(*slog.Logger) *slog.Logger
		want   map[string]any // without ids
	}{
		{
			name:   "plain",
			derive: func(l *slog.Logger) *slog.Logger { return l },
			want:   map[string]any{"k": "v"},
		},
		{
			name:   "with attrs",
			derive: func(l *slog.Logger) *slog.Logger { return l.With("stage", "enrich") },
			want:   map[string]any{"stage": "enrich", "k": "v"},
		},
		{
			name:   "group",
			derive: func(l *slog.Logger) *slog.Logger { return l.WithGroup("req") },
			want:   map[string]any{"req": map[string]any{"k": "v"}},
		},
		{
			name: "attrs, group, attrs",
			derive: func(l *slog.Logger) *slog.Logger {
				return l.With("stage", "enrich").WithGroup("req").With("id", "42")
			},
			want: map[string]any{"stage": "enrich", "req": map[string]any{"id": "42", "k": "v"}},
		},
		{
			name: "nested groups",
			derive: func(l *slog.Logger) *slog.Logger {
				return l.WithGroup("a").With("x", "1").WithGroup("b").With("y", "2")
			},
			want: map[string]any{"a": map[string]any{"x": "1", "b": map[string]any{"y": "2", "k": "v"}}},
		},
		{
			name:   "empty group name is ignored",
			derive: func(l *slog.Logger) *slog.Logger { return l.WithGroup("") },
			want:   map[string]any{"k": "v"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := tt.derive(NewLogger(&buf, LogConfig{}))
			log.InfoContext(traced, "m", "k", "v")
			log.InfoContext(context.Background(), "m", "k", "v")

			lines := decodeLines(t, &buf)
			if len(lines) != 2 {
				t.Fatalf("got %d lines, want 2", len(lines))
			}
			if want := withIDs(tt.want); !reflect.DeepEqual(lines[0], want) {
				t.Errorf("with span:\n got %v\nwant %v", lines[0], want)
			}
			if !reflect.DeepEqual(lines[1], tt.want) {
				t.Errorf("without span:\n got %v\nwant %v", lines[1], tt.want)
			}
		})
	}
}

func TestLogHandler_siblingsDoNotShareAttrs(t *testing.T) {
	var buf bytes.Buffer
	ctx := trace.ContextWithSpanContext(context.Background(), sampledSpanContext())
	parent := NewLogger(&buf, LogConfig{}).WithGroup("g").With("p", "1")
	a := parent.With("a", "1")
	b := parent.With("b", "1")
	a.InfoContext(ctx, "m")
	b.InfoContext(ctx, "m")

	lines := decodeLines(t, &buf)
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want 2", len(lines))
	}
	if g := lines[0]["g"]; !reflect.DeepEqual(g, map[string]any{"p": "1", "a": "1"}) {
		t.Errorf("a: g = %v", g)
	}
	if g := lines[1]["g"]; !reflect.DeepEqual(g, map[string]any{"p": "1", "b": "1"}) {
		t.Errorf("b: g = %v", g)
	}
}

func TestNewLogger_formatAndLevel(t *testing.T) {
	ctx := trace.ContextWithSpanContext(context.Background(), sampledSpanContext())
	tests := []struct {
		name      string
		cfg       LogConfig
		wantLines int
		wantSub   string
	}{
		{"json default at info", LogConfig{}, 2, `"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"`},
		{"text", LogConfig{Format: LogFormatText}, 2, "trace_id=4bf92f3577b34da6a3ce929d0e0e4736 span_id=00f067aa0ba902b7"},
		{"debug level", LogConfig{Level: slog.LevelDebug}, 3, `"span_id":"00f067aa0ba902b7"`},
		{"error level", LogConfig{Level: slog.LevelError}, 1, `"level":"ERROR"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := NewLogger(&buf, tt.cfg)
			log.DebugContext(ctx, "d")
			log.InfoContext(ctx, "i")
			log.ErrorContext(ctx, "e")
			out := strings.TrimSpace(buf.String())
			if n := len(strings.Split(out, "\n")); n != tt.wantLines {
				t.Errorf("got %d lines, want %d:\n%s", n, tt.wantLines, out)
			}
			if !strings.Contains(out, tt.wantSub) {
				t.Errorf("output lacks %q:\n%s", tt.wantSub, out)
			}
		})
	}
}

// TestLogHandler_slogtestConformance runs the standard handler checks with a
// span in every record's context (via a context-injecting wrapper), so the
// grouped slow path is exercised too.
func TestLogHandler_slogtestConformance(t *testing.T) {
	sc := sampledSpanContext()
	for _, withSpan := range []bool{false, true} {
		t.Run(map[bool]string{false: "without span", true: "with span"}[withSpan], func(t *testing.T) {
			var buf bytes.Buffer
			var h slog.Handler = NewLogHandler(slog.NewJSONHandler(&buf, nil))
			if withSpan {
				h = spanCtxHandler{h, sc}
			}
			results := func() []map[string]any {
				var out []map[string]any
				for line := range strings.SplitSeq(strings.TrimSpace(buf.String()), "\n") {
					var m map[string]any
					if err := json.Unmarshal([]byte(line), &m); err != nil {
						t.Fatalf("log line %q: %v", line, err)
					}
					if withSpan && m[LogTraceIDKey] != sc.TraceID().String() {
						t.Errorf("line without trace_id: %s", line)
					}
					delete(m, LogTraceIDKey)
					delete(m, LogSpanIDKey)
					out = append(out, m)
				}
				return out
			}
			if err := slogtest.TestHandler(h, results); err != nil {
				t.Error(err)
			}
		})
	}
}

// spanCtxHandler puts sc into the context of every record it handles.
type spanCtxHandler struct {
	slog.Handler
	sc trace.SpanContext
}

func (h spanCtxHandler) Handle(ctx context.Context, r slog.Record) error {
	return h.Handler.Handle(trace.ContextWithSpanContext(ctx, h.sc), r)
}

func (h spanCtxHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return spanCtxHandler{h.Handler.WithAttrs(as), h.sc}
}

func (h spanCtxHandler) WithGroup(name string) slog.Handler {
	return spanCtxHandler{h.Handler.WithGroup(name), h.sc}
}

// sampledSpanContext returns a valid, sampled span context.
func sampledSpanContext() trace.SpanContext {
	return trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
	})
}
