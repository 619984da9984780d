package e2e

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/dropstream/dropstream/internal/testenv"
)

// jaegerTrace is a trace as Jaeger's query API answers it.
type jaegerTrace struct {
	TraceID string `json:"traceID"`
	Spans   []struct {
		TraceID       string `json:"traceID"`
		SpanID        string `json:"spanID"`
		OperationName string `json:"operationName"`
		References    []struct {
			RefType string `json:"refType"`
			TraceID string `json:"traceID"`
			SpanID  string `json:"spanID"`
		} `json:"references"`
		StartTime int64  `json:"startTime"` // µs since the epoch
		Duration  int64  `json:"duration"`  // µs
		ProcessID string `json:"processID"`
		Tags      []struct {
			Key   string `json:"key"`
			Type  string `json:"type"`
			Value any    `json:"value"`
		} `json:"tags"`
	} `json:"spans"`
	Processes map[string]struct {
		ServiceName string `json:"serviceName"`
	} `json:"processes"`
}

// jaegerGet calls Jaeger's query API and returns the traces it answers.
func jaegerGet(t *testing.T, query, path string) []jaegerTrace {
	t.Helper()
	resp, err := http.Get(query + path)
	if err != nil {
		t.Fatalf("jaeger %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusNotFound {
		return nil
	}
	var r struct {
		Data []jaegerTrace `json:"data"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &r) != nil {
		t.Fatalf("jaeger %s = %d %s", path, resp.StatusCode, body)
	}
	return r.Data
}

var spanKinds = map[string]tracepb.Span_SpanKind{"client": tracepb.Span_SPAN_KIND_CLIENT, "server": tracepb.Span_SPAN_KIND_SERVER,
	"producer": tracepb.Span_SPAN_KIND_PRODUCER, "consumer": tracepb.Span_SPAN_KIND_CONSUMER, "internal": tracepb.Span_SPAN_KIND_INTERNAL}

// otlpSpans turns Jaeger's spans back into OTLP spans (parent from the
// CHILD_OF reference, links from FOLLOWS_FROM, kind from span.kind), so
// the checks of the in-test receiver apply unchanged, and maps each span
// id to the service.name of the process that sent it.
func otlpSpans(t *testing.T, traces []jaegerTrace) ([]*tracepb.Span, map[string]string) {
	t.Helper()
	id := func(s string) []byte {
		b, err := hex.DecodeString(strings.Repeat("0", (2-len(s)%2)%2) + s)
		if err != nil {
			t.Fatalf("jaeger id %q: %v", s, err)
		}
		return b
	}
	var out []*tracepb.Span
	services := map[string]string{}
	for _, tr := range traces {
		for _, js := range tr.Spans {
			s := &tracepb.Span{TraceId: id(js.TraceID), SpanId: id(js.SpanID), Name: js.OperationName,
				StartTimeUnixNano: uint64(js.StartTime) * 1000, EndTimeUnixNano: uint64(js.StartTime+js.Duration) * 1000}
			for _, r := range js.References {
				switch {
				case r.RefType == "CHILD_OF" && s.ParentSpanId == nil && r.TraceID == js.TraceID:
					s.ParentSpanId = id(r.SpanID)
				default:
					s.Links = append(s.Links, &tracepb.Span_Link{TraceId: id(r.TraceID), SpanId: id(r.SpanID)})
				}
			}
			for _, tag := range js.Tags {
				if tag.Key == "span.kind" {
					s.Kind = spanKinds[fmt.Sprint(tag.Value)]
					continue
				}
				v := &commonpb.AnyValue{}
				switch x := tag.Value.(type) {
				case float64:
					v.Value = &commonpb.AnyValue_IntValue{IntValue: int64(x)}
				default:
					v.Value = &commonpb.AnyValue_StringValue{StringValue: fmt.Sprint(x)}
				}
				s.Attributes = append(s.Attributes, &commonpb.KeyValue{Key: tag.Key, Value: v})
			}
			out = append(out, s)
			services[js.SpanID] = tr.Processes[js.ProcessID].ServiceName
		}
	}
	return out, services
}

// TestJaeger_pollToWebhookAcrossTwoProcesses runs the availability pipeline
// in two dropstream processes exporting OTLP to the real Jaeger of the test
// environment: one polls and normalizes (its service.name set by
// OTEL_SERVICE_NAME), the other diffs, projects, appends to ClickHouse and
// notifies (its service.name from its role). Through Jaeger's query API it
// checks that the delivered webhook's trace runs from the poll to the
// webhook call with the right span names, kinds and parents, each span
// reported by the process that made it, and that the batch stages' spans
// link to that trace.
func TestJaeger_pollToWebhookAcrossTwoProcesses(t *testing.T) {
	ctx := context.Background()
	jaeger := testenv.JaegerServer(t)
	redisURL := testenv.RedisURL(t)
	dsn := testenv.ClickHouseDSN(t)
	testenv.OpenClickHouse(t, dsn) // migrated
	rdb := dial(t, redisURL)
	bin := buildBinary(t)
	w := newWorld(t, 2)
	hook := newWebhook(t)
	w.newWatchers(t, ctx, rdb, hook)

	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", jaeger.OTLP)
	t.Setenv("OTEL_TRACES_SAMPLER", "always_on")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "200")
	collectorName := "dropstream-e2e-collector-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	t.Setenv("OTEL_SERVICE_NAME", collectorName)
	run := []string{"run", "--redis-url", redisURL, "--partitions", strconv.Itoa(partitions), "--clickhouse-dsn", dsn}
	front := []string{"avail-collector", "avail-normalizer"}
	startProc(t, bin, "collector", append(run, "--api-addr", "", "--stages", strings.Join(front, ","))...).waitStarted(t, "avail-normalizer")
	t.Setenv("OTEL_SERVICE_NAME", "") // the second process is named by its role
	back := []string{"avail-diff", "avail-projection", "avail-analytics-transitions", "avail-analytics-runs", "avail-notifier"}
	api := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	startProc(t, bin, "pipeline", append(run, "--api-addr", api, "--stages", strings.Join(back, ","))...).waitStarted(t, back...)

	src, err := json.Marshal(w.src)
	if err != nil {
		t.Fatal(err)
	}
	var srcBody map[string]any
	_ = json.Unmarshal(src, &srcBody)
	srcBody["interval"] = "1s"
	src, _ = json.Marshal(srcBody)
	resp, err := http.Post("http://"+api+"/v1/sources", "application/json", strings.NewReader(string(src)))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /v1/sources = %d %s", resp.StatusCode, body)
	}

	// The collector polls every second; the world changes until a stable
	// opening reaches a watcher's webhook.
	var got []delivery
	testenv.WaitFor(t, 90*time.Second, func() bool {
		got, _ = hook.deliveries()
		if len(got) == 0 {
			w.sim.Advance(1)
		}
		return len(got) > 0
	}, "a webhook delivered")
	d := got[0]
	pipelineName := "dropstream-avail"

	var spans []*tracepb.Span
	var services map[string]string
	testenv.WaitFor(t, 60*time.Second, func() bool {
		// Each process exports on its own schedule: wait for a whole trace,
		// the webhook's span and every parent.
		spans, services = otlpSpans(t, jaegerGet(t, jaeger.Query, "/api/traces/"+d.traceID))
		ix, notified := indexSpans(spans), false
		for _, s := range spans {
			if len(s.ParentSpanId) != 0 && ix.parent(s) == nil {
				return false
			}
			notified = notified || s.Name == "notify webhook"
		}
		return notified
	}, "trace %s, whole, with its notify webhook span in Jaeger", d.traceID)
	ix := indexSpans(spans)
	checkDeliveryTrace(t, ix, d)
	for _, s := range spans {
		want := pipelineName
		if strings.HasPrefix(s.Name, "poll ") || s.Name == "send avail.raw" || s.Name == "process avail.raw" || s.Name == "send avail.snapshots" {
			want = collectorName
		}
		if got := services[hex.EncodeToString(s.SpanId)]; got != want {
			t.Errorf("span %q reported by service %q, want %q", s.Name, got, want)
		}
	}

	// The batch stages' spans start traces of their own, linked to the
	// messages they merged.
	for _, b := range []struct{ op, group string }{
		{"process avail.snapshots", "avail-diff"},
		{"process avail.transitions", "avail-analytics-transitions"},
	} {
		var batch []*tracepb.Span
		testenv.WaitFor(t, 30*time.Second, func() bool {
			q := url.Values{"service": {pipelineName}, "operation": {b.op}, "limit": {"5000"}, "lookback": {"1h"}}
			batch, _ = otlpSpans(t, jaegerGet(t, jaeger.Query, "/api/traces?"+q.Encode()))
			for _, s := range batch {
				for _, l := range s.Links {
					if hex.EncodeToString(l.TraceId) == d.traceID {
						return true
					}
				}
			}
			return false
		}, "a %s batch span linked to trace %s", b.op, d.traceID)
		checkBatchLinks(t, ix, batch, b.op, b.group, d.traceID)
	}
}
