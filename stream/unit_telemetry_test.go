package stream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/dropstream/dropstream/internal/telemetrytest"
	dsotel "github.com/dropstream/dropstream/otel"
)

var unitInfo = StageInfo{Stage: "enrich", Topic: NewTopic("avail", "raw", 4), Group: "enrich-group", Consumer: "copy-1"}

// unitOutcomeHandler fails according to the message's payload.
func unitOutcomeHandler(_ context.Context, m *Message) error {
	switch string(m.Payload) {
	case "fail":
		return errors.New("transient")
	case "drop":
		return fmt.Errorf("not for us: %w", ErrDrop)
	case "permanent":
		return Permanent(errors.New("bad input"))
	case "panic":
		panic("boom")
	}
	return nil
}

// TestMetrics_countsByOutcome runs messages through the Metrics middleware
// and tallies their outcomes the way the runner does (one outcomeCounts per
// batch, added to the stage's outcomeCounter).
func TestMetrics_countsByOutcome(t *testing.T) {
	mp, collect := telemetrytest.Metrics(t)
	h := Chain(unitOutcomeHandler, Metrics(mp, unitInfo))
	settled := newOutcomeCounter(mp, unitInfo)

	batches := [][]string{{"ok", "fail", "ok"}, {"drop", "permanent", "ok"}}
	i := 0
	for _, batch := range batches {
		var counts outcomeCounts
		for _, p := range batch {
			m := NewMessage(fmt.Sprint("k", i), "t", []byte(p))
			m.ID = fmt.Sprintf("1700000000000-%d", i)
			m.Attempt = 1
			switch i {
			case 2:
				m.ID = "" // not published yet: no age
			case 5:
				m.Attempt = 2 // a redelivery: its age is not recorded again
			}
			counts.count(Classify(h(context.Background(), m)))
			i++
		}
		settled.add(&counts)
	}

	rm := collect()
	got := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != instrumentationScope {
			t.Errorf("scope %q, want %q", sm.Scope.Name, instrumentationScope)
		}
		for _, m := range sm.Metrics {
			got[m.Name] = m
		}
	}

	sum, ok := got["dropstream.stage.messages"].Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("dropstream.stage.messages is %T, want an int64 sum", got["dropstream.stage.messages"].Data)
	}
	if !sum.IsMonotonic {
		t.Error("dropstream.stage.messages is not monotonic")
	}
	wantCounts := map[string]int64{"acked": 3, "failed": 1, "dropped": 1, "dead_lettered": 1}
	counts := map[string]int64{}
	for _, dp := range sum.DataPoints {
		unitWantAttrs(t, dp.Attributes, "stage", "enrich", "stream", "avail.raw")
		outcome, ok := dp.Attributes.Value("outcome")
		if !ok || dp.Attributes.Len() != 3 {
			t.Errorf("data point attributes %v, want stage, stream and outcome", dp.Attributes.ToSlice())
		}
		counts[outcome.AsString()] += dp.Value
	}
	if fmt.Sprint(counts) != fmt.Sprint(wantCounts) {
		t.Errorf("messages by outcome = %v, want %v", counts, wantCounts)
	}

	unitHistogramCount(t, got, "dropstream.stage.handler.duration", 6)
	unitHistogramCount(t, got, "dropstream.stage.message.age", 4)
}

func unitHistogramCount(t *testing.T, got map[string]metricdata.Metrics, name string, want uint64) {
	t.Helper()
	hist, ok := got[name].Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%s is %T, want a float64 histogram", name, got[name].Data)
	}
	var n uint64
	for _, dp := range hist.DataPoints {
		unitWantAttrs(t, dp.Attributes, "stage", "enrich", "stream", "avail.raw")
		if dp.Attributes.Len() != 2 {
			t.Errorf("%s attributes %v, want stage and stream only", name, dp.Attributes.ToSlice())
		}
		n += dp.Count
	}
	if n != want {
		t.Errorf("%s count = %d, want %d", name, n, want)
	}
	if unit := got[name].Unit; unit != "s" {
		t.Errorf("%s unit %q, want s", name, unit)
	}
}

func unitWantAttrs(t *testing.T, set attribute.Set, kv ...string) {
	t.Helper()
	for i := 0; i < len(kv); i += 2 {
		if v, ok := set.Value(attribute.Key(kv[i])); !ok || v.AsString() != kv[i+1] {
			t.Errorf("attribute %s = %q (present %v), want %q", kv[i], v.AsString(), ok, kv[i+1])
		}
	}
}

func TestTracing_consumerSpanContinuesRemoteParent(t *testing.T) {
	const (
		traceID  = "0af7651916cd43dd8448eb211c80319c"
		parentID = "b7ad6b7169203331"
	)
	sr := tracetest.NewSpanRecorder()
	for pname, tp := range unitTracerProviders(t, sr, sdktrace.ParentBased(sdktrace.AlwaysSample())) {
		mw := tracing(tp, propagation.TraceContext{}, unitInfo)

		tests := []struct {
			name       string
			payload    string
			attempt    int
			wantStatus codes.Code
		}{
			{"success", "ok", 1, codes.Unset},
			{"failure", "fail", 1, codes.Error},
			{"dead-lettered redelivery", "permanent", 3, codes.Error},
		}
		for _, tc := range tests {
			t.Run(pname+"/"+tc.name, func(t *testing.T) {
				sr.Reset()
				m := &Message{ID: "1700000000000-1", Key: "k", Type: "t", Payload: []byte(tc.payload), Attempt: tc.attempt,
					TraceParent: "00-" + traceID + "-" + parentID + "-01"}
				var handlerSpan trace.SpanContext
				err := Chain(func(ctx context.Context, m *Message) error {
					handlerSpan = trace.SpanContextFromContext(ctx)
					return unitOutcomeHandler(ctx, m)
				}, mw)(context.Background(), m)

				ended := sr.Ended()
				if len(ended) != 1 {
					t.Fatalf("%d spans ended, want 1", len(ended))
				}
				s := ended[0]
				if s.Name() != "process avail.raw" || s.SpanKind() != trace.SpanKindConsumer {
					t.Errorf("span %q kind %v, want \"process avail.raw\" consumer", s.Name(), s.SpanKind())
				}
				if got := s.SpanContext().TraceID().String(); got != traceID {
					t.Errorf("trace id %s, want the parent's %s", got, traceID)
				}
				if got := s.Parent(); got.SpanID().String() != parentID || !got.IsRemote() {
					t.Errorf("parent %s (remote %v), want remote %s", got.SpanID(), got.IsRemote(), parentID)
				}
				attrs := attribute.NewSet(s.Attributes()...)
				unitWantAttrs(t, attrs, "messaging.system", "redis", "messaging.consumer.group.name", "enrich-group",
					"messaging.destination.name", "avail.raw", "messaging.operation.type", "process",
					"messaging.message.id", "1700000000000-1")
				if got := s.Status().Code; got != tc.wantStatus {
					t.Errorf("status %v, want %v", got, tc.wantStatus)
				}
				if tc.wantStatus == codes.Error {
					if s.Status().Description != err.Error() {
						t.Errorf("status description %q, want %q", s.Status().Description, err)
					}
					unitWantAttrs(t, attrs, "outcome", string(Classify(err)))
					if len(s.Events()) == 0 || s.Events()[0].Name != "exception" {
						t.Errorf("error not recorded as an exception event: %v", s.Events())
					}
				}
				if tc.attempt > 1 {
					if v, ok := attrs.Value("dropstream.message.attempt"); !ok || v.AsInt64() != int64(tc.attempt) {
						t.Errorf("attempt attribute %v, want %d", v.String(), tc.attempt)
					}
					unitWantAttrs(t, attrs, "messaging.consumer.name", "copy-1")
				} else if _, ok := attrs.Value("dropstream.message.attempt"); ok {
					t.Error("first delivery carries an attempt attribute")
				}
				if !handlerSpan.Equal(s.SpanContext()) {
					t.Errorf("handler context span %v, want the consumer span %v", handlerSpan, s.SpanContext())
				}
				if got := trace.SpanContextFromContext(m.Context()); !got.Equal(s.SpanContext()) {
					t.Errorf("msg.Context() span %v, want the consumer span %v", got, s.SpanContext())
				}
			})
		}
	}
}

// unitTracerProviders are the SDK's tracer provider and dsotel's, whose span
// log records the consumer spans, both sampling with sampler into sr.
func unitTracerProviders(t *testing.T, sr *tracetest.SpanRecorder, sampler sdktrace.Sampler) map[string]trace.TracerProvider {
	sdk := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr), sdktrace.WithSampler(sampler))
	logged := dsotel.NewTracerProvider(sampler, nil, nil)
	logged.RegisterSpanProcessor(sr)
	t.Cleanup(func() { _, _ = sdk.Shutdown(context.Background()), logged.Shutdown(context.Background()) })
	return map[string]trace.TracerProvider{"sdk": sdk, "spanlog": logged}
}

func TestTracing_noTraceContextStartsRoot(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	for pname, tp := range unitTracerProviders(t, sr, sdktrace.ParentBased(sdktrace.AlwaysSample())) {
		for _, parent := range []string{"", "garbage"} {
			sr.Reset()
			m := &Message{Key: "k", Payload: []byte("ok"), Attempt: 1, TraceParent: parent}
			if err := Chain(unitOutcomeHandler, tracing(tp, propagation.TraceContext{}, unitInfo))(context.Background(), m); err != nil {
				t.Fatal(err)
			}
			ended := sr.Ended()
			if len(ended) != 1 || ended[0].Parent().IsValid() || !ended[0].SpanContext().IsValid() {
				t.Fatalf("%s: traceparent %q: want one valid root span, got %v", pname, parent, ended)
			}
		}
	}
}

func TestTracing_unsampledParentPassesThrough(t *testing.T) {
	const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
	sr := tracetest.NewSpanRecorder()
	// AlwaysSample would record a child of anything: only the runtime's own
	// choice keeps the unsampled parent unrecorded.
	for pname, tp := range unitTracerProviders(t, sr, sdktrace.AlwaysSample()) {
		m := &Message{ID: "1700000000000-1", Key: "k", Payload: []byte("ok"), Attempt: 1, TraceParent: parent}
		var out Message
		err := Chain(func(ctx context.Context, m *Message) error {
			InjectTrace(m.Context(), propagation.TraceContext{}, &out)
			return nil
		}, tracing(tp, propagation.TraceContext{}, unitInfo))(context.Background(), m)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(sr.Ended()); got != 0 {
			t.Fatalf("%s: %d spans, want 0", pname, got)
		}
		if out.TraceParent != parent {
			t.Errorf("%s: published traceparent %q, want the parent's %q passed on", pname, out.TraceParent, parent)
		}
	}
}

// unitLogRecords runs messages through Logging and returns the JSON records.
func unitLogRecords(t *testing.T, level slog.Level, h Handler, msgs ...*Message) []map[string]any {
	t.Helper()
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: level}))
	chained := Chain(h, Logging(logger, unitInfo))
	for _, m := range msgs {
		_ = chained(context.Background(), m)
	}
	var recs []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("bad log line %q: %v", line, err)
		}
		recs = append(recs, r)
	}
	return recs
}

func TestLogging_levelsAndFields(t *testing.T) {
	recovering := Chain(unitOutcomeHandler, Recovery())
	tests := []struct {
		name      string
		payload   string
		wantLevel string // "" means no record
		wantMsg   string
		wantStack bool
	}{
		{"success logs nothing", "ok", "", "", false},
		{"drop logs nothing", "drop", "", "", false},
		{"failure at warn", "fail", "WARN", "message failed", false},
		{"dead letter at error", "permanent", "ERROR", "message dead-lettered", false},
		{"panic at warn with stack", "panic", "WARN", "message failed", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := &Message{ID: "1700000000000-3", Key: "order-7", Type: "order.v1", Payload: []byte(tc.payload), Attempt: 2}
			recs := unitLogRecords(t, slog.LevelInfo, recovering, m)
			if tc.wantLevel == "" {
				if len(recs) != 0 {
					t.Fatalf("want no records at Info, got %v", recs)
				}
				return
			}
			if len(recs) != 1 {
				t.Fatalf("want 1 record, got %v", recs)
			}
			r := recs[0]
			want := map[string]any{"level": tc.wantLevel, "msg": tc.wantMsg, "stage": "enrich", "stream": "avail.raw",
				"id": "1700000000000-3", "key": "order-7", "type": "order.v1", "attempt": 2.0,
				"outcome": string(Classify(recovering(context.Background(), m)))}
			for k, v := range want {
				if r[k] != v {
					t.Errorf("record %s = %#v, want %#v", k, r[k], v)
				}
			}
			if e, _ := r["error"].(string); e == "" {
				t.Errorf("record has no error: %v", r)
			}
			stack, hasStack := r["stack"].(string)
			if hasStack != tc.wantStack {
				t.Errorf("record has stack = %v, want %v", hasStack, tc.wantStack)
			}
			if tc.wantStack && !strings.Contains(stack, "goroutine ") {
				t.Errorf("stack %q does not look like a stack", stack)
			}
		})
	}
}

func TestLogging_debugLogsHandledMessages(t *testing.T) {
	recs := unitLogRecords(t, slog.LevelDebug, unitOutcomeHandler,
		&Message{ID: "1-1", Key: "a", Payload: []byte("ok"), Attempt: 1},
		&Message{ID: "1-2", Key: "b", Payload: []byte("drop"), Attempt: 1})
	if len(recs) != 2 {
		t.Fatalf("want 2 debug records, got %v", recs)
	}
	for i, outcome := range []string{"acked", "dropped"} {
		r := recs[i]
		if r["level"] != "DEBUG" || r["msg"] != "message handled" || r["outcome"] != outcome {
			t.Errorf("record %d = %v, want DEBUG message handled, outcome %s", i, r, outcome)
		}
	}
	if _, ok := recs[0]["error"]; ok {
		t.Errorf("successful message logged an error: %v", recs[0])
	}
}
