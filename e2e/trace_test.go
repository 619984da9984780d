package e2e

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/collector"
	"github.com/dropstream/dropstream/internal/egress/egresstest"
	"github.com/dropstream/dropstream/internal/testenv"
	dsotel "github.com/dropstream/dropstream/otel"
	"github.com/dropstream/dropstream/stream"
)

// otlpReceiver is an OTLP/HTTP trace endpoint (POST /v1/traces, protobuf)
// that keeps every span it receives.
type otlpReceiver struct {
	srv *httptest.Server

	mu    sync.Mutex
	spans []*tracepb.Span
	bad   []string
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *otlpReceiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 64<<20))
	var msg collectortrace.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &msg)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil || req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
		r.bad = append(r.bad, fmt.Sprintf("%s %s (%s): %v", req.Method, req.URL.Path, req.Header.Get("Content-Type"), err))
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	for _, rs := range msg.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			r.spans = append(r.spans, ss.Spans...)
		}
	}
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (r *otlpReceiver) received() ([]*tracepb.Span, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...), append([]string(nil), r.bad...)
}

// spanIndex finds spans by id and by trace.
type spanIndex struct {
	byID    map[string]*tracepb.Span
	byTrace map[string][]*tracepb.Span
}

func indexSpans(spans []*tracepb.Span) spanIndex {
	ix := spanIndex{byID: map[string]*tracepb.Span{}, byTrace: map[string][]*tracepb.Span{}}
	for _, s := range spans {
		ix.byID[hex.EncodeToString(s.SpanId)] = s
		tid := hex.EncodeToString(s.TraceId)
		ix.byTrace[tid] = append(ix.byTrace[tid], s)
	}
	return ix
}

func (ix spanIndex) parent(s *tracepb.Span) *tracepb.Span {
	return ix.byID[hex.EncodeToString(s.ParentSpanId)]
}

// path returns the names of s and its ancestors, root first.
func (ix spanIndex) path(s *tracepb.Span) []string {
	var names []string
	for ; s != nil; s = ix.parent(s) {
		names = append([]string{s.Name}, names...)
	}
	return names
}

func attr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			if sv := kv.Value.GetStringValue(); sv != "" {
				return sv
			}
			return fmt.Sprint(kv.Value.GetIntValue())
		}
	}
	return ""
}

// TestTrace_pollToDeliveredNotification runs the availability pipeline in
// process with the OTLP HTTP exporter (configured by the standard OTEL_*
// variables, as in production) pointed at a receiver in the test, until a
// webhook notification is delivered. It then checks, from the spans
// received, that the delivered notification's trace runs from the poll
// through every stream hop to the webhook call, that each hop has the
// messaging kind and attributes, and that the batch stages (diff and the
// ClickHouse writers) link their batch span to every message they merged.
func TestTrace_pollToDeliveredNotification(t *testing.T) {
	ctx := context.Background()
	recv := newOTLPReceiver(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", recv.srv.URL)
	t.Setenv("OTEL_SERVICE_NAME", "dropstream-e2e")
	prov, err := dsotel.Setup(ctx, dsotel.Config{})
	if err != nil {
		t.Fatal(err)
	}
	shutdown := sync.OnceFunc(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := prov.Shutdown(sctx); err != nil {
			t.Errorf("shutdown (flushes the spans): %v", err)
		}
	})
	t.Cleanup(shutdown)
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	tel := stream.Telemetry{TracerProvider: prov.TracerProvider, MeterProvider: prov.MeterProvider,
		Propagator: propagation.TraceContext{}, Logger: logger}

	topics := avail.NewTopics(partitions)
	rdb := dial(t, testenv.RedisURL(t))
	ch := testenv.ClickHouse(t)
	w := newWorld(t, 2)
	hook := newWebhook(t)
	w.newWatchers(t, ctx, rdb, hook)
	startStages(t, rdb, ch, topics, tel)
	pub := stream.NewPublisher(rdb, tel)
	col, err := collector.NewCollector(topics, pub, collector.CollectorConfig{NoJitter: true, Telemetry: tel, Egress: egresstest.Loopback(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = col.Close() })
	if err := col.Upsert(w.src); err != nil {
		t.Fatal(err)
	}
	groups := pipelineGroups(topics)
	var got []delivery
	for round := 0; round < 12 && len(got) == 0; round++ {
		if round > 0 {
			w.sim.Advance(1)
		}
		if err := col.PollOnce(ctx, sourceID); err != nil {
			t.Fatalf("poll: %v", err)
		}
		why := new(reason)
		testenv.WaitFor(t, idleTimeout, func() bool { return why.set(busy(ctx, rdb, groups)) }, "pipeline idle (busy: %s)", why)
		got, _ = hook.deliveries()
	}
	if len(got) == 0 {
		t.Fatal("no notification delivered in 12 rounds")
	}
	shutdown()
	spans, bad := recv.received()
	if len(bad) > 0 {
		t.Fatalf("receiver rejected exports: %v", bad)
	}
	ix := indexSpans(spans)
	checkDeliveryTrace(t, ix, got[0])
	checkBatchLinks(t, ix, spans, "process "+topics.Snapshots.String(), "avail-diff", got[0].traceID)
	checkBatchLinks(t, ix, spans, "process "+topics.Transitions.String(), "avail-analytics-transitions", got[0].traceID)
}

// checkDeliveryTrace checks the trace of one delivered notification.
func checkDeliveryTrace(t *testing.T, ix spanIndex, d delivery) {
	t.Helper()
	if d.traceID == "" || d.headerTraceID != d.traceID {
		t.Fatalf("delivery %+v: body trace id %q, traceparent header trace id %q: want the same, non-empty", d, d.traceID, d.headerTraceID)
	}
	trace := ix.byTrace[d.traceID]
	if len(trace) == 0 {
		t.Fatalf("no span received of the delivery's trace %s", d.traceID)
	}
	var dump []string
	for _, s := range trace {
		var kv []string
		for _, a := range s.Attributes {
			kv = append(kv, a.Key+"="+attr(s, a.Key))
		}
		dump = append(dump, fmt.Sprintf("%s [%s] %v links=%d %v", s.Name, s.Kind, ix.path(s), len(s.Links), kv))
	}
	sort.Strings(dump)
	t.Logf("trace %s:\n  %s", d.traceID, strings.Join(dump, "\n  "))
	var roots []*tracepb.Span
	for _, s := range trace {
		if len(s.ParentSpanId) == 0 {
			roots = append(roots, s)
		} else if ix.parent(s) == nil {
			t.Errorf("span %q has a parent %x that was not exported", s.Name, s.ParentSpanId)
		}
	}
	if len(roots) != 1 {
		t.Fatalf("trace has %d roots, want one (the poll)", len(roots))
	}
	poll := roots[0]
	if poll.Name != "poll simulator" || poll.Kind != tracepb.Span_SPAN_KIND_CLIENT || attr(poll, "dropstream.source.id") != sourceID ||
		attr(poll, "dropstream.poll.outcome") != "ok" {
		t.Errorf("root span %q kind %s attributes %v: want the client span poll simulator of source %s", poll.Name, poll.Kind, poll.Attributes, sourceID)
	}
	// The delivery's span and its ancestry: the poll, the normalizer's
	// processing of the raw run (whose context the diff wrote into each
	// transition), the notifier's processing of the transition.
	var notify *tracepb.Span
	for _, s := range trace {
		// One poll may open several slots: the delivery's span is the one
		// of its event.
		if s.Name == "notify webhook" && attr(s, "dropstream.notifier.event_id") == d.event &&
			strings.Join(ix.path(s), " > ") == "poll simulator > process avail.raw > process avail.transitions > notify webhook" {
			notify = s
		}
	}
	if notify == nil {
		t.Fatalf("no span notify webhook of event %s under poll simulator > process avail.raw > process avail.transitions", d.event)
	}
	if attr(notify, "dropstream.notifier.event_id") != d.event || attr(notify, "dropstream.notifier.outcome") != "sent" {
		t.Errorf("notify span event %q outcome %q, want the delivered event %s, sent", attr(notify, "dropstream.notifier.event_id"),
			attr(notify, "dropstream.notifier.outcome"), d.event)
	}
	notified := ix.parent(notify)
	normalized := ix.parent(notified)
	checkConsumer(t, notified, "avail.transitions", "avail-notifier")
	checkConsumer(t, normalized, "avail.raw", "avail-normalizer")
	// Each hop's producer span sits beside the consumer of what it sent:
	// send avail.raw under the poll carries the message id the normalizer
	// processed; send avail.snapshots is under the normalizer.
	sendRaw, sendSnap := 0, 0
	for _, s := range trace {
		switch {
		case s.Name == "send avail.raw" && ix.parent(s) == poll:
			checkProducer(t, s, "avail.raw")
			if attr(s, "messaging.message.id") == attr(normalized, "messaging.message.id") {
				sendRaw++
			}
		case s.Name == "send avail.snapshots" && ix.parent(s) == normalized:
			checkProducer(t, s, "avail.snapshots")
			sendSnap++
		}
	}
	if sendRaw != 1 || sendSnap != 1 {
		t.Errorf("%d send avail.raw spans of the processed message under the poll, %d send avail.snapshots under the normalizer; want 1 each", sendRaw, sendSnap)
	}
}

// checkConsumer checks a per-message process span's kind and messaging
// attributes.
func checkConsumer(t *testing.T, s *tracepb.Span, stream, group string) {
	t.Helper()
	want := map[string]string{"messaging.system": "redis", "messaging.operation.type": "process",
		"messaging.destination.name": stream, "messaging.consumer.group.name": group}
	if s.Name != "process "+stream || s.Kind != tracepb.Span_SPAN_KIND_CONSUMER {
		t.Errorf("span %q kind %s, want consumer span process %s", s.Name, s.Kind, stream)
	}
	for k, v := range want {
		if got := attr(s, k); got != v {
			t.Errorf("span %q: %s = %q, want %q", s.Name, k, got, v)
		}
	}
	if attr(s, "messaging.message.id") == "" {
		t.Errorf("span %q has no messaging.message.id", s.Name)
	}
}

// checkProducer checks a send span's kind and messaging attributes.
func checkProducer(t *testing.T, s *tracepb.Span, stream string) {
	t.Helper()
	if s.Kind != tracepb.Span_SPAN_KIND_PRODUCER || attr(s, "messaging.system") != "redis" ||
		attr(s, "messaging.operation.type") != "send" || attr(s, "messaging.destination.name") != stream || attr(s, "messaging.message.id") == "" {
		t.Errorf("span %q kind %s attributes %v: want a producer span sending to %s", s.Name, s.Kind, s.Attributes, stream)
	}
}

// checkBatchLinks checks the batch spans of a stage: each is a consumer
// span starting its own trace, with the batch size, linked to the context
// of every message it merged; and at least one of them links to the
// delivered notification's trace at the span the stage's messages carry
// (the normalizer's process span, for the diff and the writer alike).
func checkBatchLinks(t *testing.T, ix spanIndex, spans []*tracepb.Span, name, group, traceID string) {
	t.Helper()
	var target []byte
	for _, s := range ix.byTrace[traceID] {
		if s.Name == "process avail.raw" {
			target = s.SpanId
		}
	}
	batches, linked, empty := 0, 0, 0
	for _, s := range spans {
		if s.Name != name || attr(s, "messaging.consumer.group.name") != group {
			continue
		}
		n := attr(s, "messaging.batch.message_count")
		if n == "0" {
			empty++ // an empty read must not produce a batch span
			continue
		}
		batches++
		if len(s.ParentSpanId) != 0 || s.Kind != tracepb.Span_SPAN_KIND_CONSUMER || attr(s, "messaging.system") != "redis" ||
			attr(s, "messaging.operation.type") != "process" || n == "" || n == "0" {
			t.Errorf("batch span %q of %s: parent %x kind %s attributes %v", name, group, s.ParentSpanId, s.Kind, s.Attributes)
		}
		if fmt.Sprint(len(s.Links)) != n {
			t.Errorf("batch span %q of %s: %d links for %s messages", name, group, len(s.Links), n)
		}
		for _, l := range s.Links {
			if hex.EncodeToString(l.TraceId) == traceID && string(l.SpanId) == string(target) {
				linked++
			}
		}
	}
	t.Logf("%s of %s: %d batch spans, %d linked to the delivery's trace, %d empty", name, group, batches, linked, empty)
	if empty > 0 {
		t.Errorf("%d batch spans %q of %s with no message: an empty read must not be traced", empty, name, group)
	}
	if batches == 0 || linked == 0 {
		t.Errorf("%d batch spans %q of %s, %d linked to the delivery's trace at process avail.raw; want some of each", batches, name, group, linked)
	}
}
