package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/dropstream/dropstream/internal/testenv"
)

// checkoutCall calls the checkout contract on base and decodes its answer.
func checkoutCall(t *testing.T, base, path string, out any) int {
	t.Helper()
	resp, err := http.Post(base+path, "application/json", nil)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && json.Unmarshal(b, out) != nil {
		t.Fatalf("POST %s = %d %s", path, resp.StatusCode, b)
	}
	return resp.StatusCode
}

// TestJaeger_checkoutRequestThroughTheSaga runs the checkout flow in one
// dropstream process exporting to the real Jaeger and checks, through
// Jaeger's query API, that the trace of one checkout request holds the
// HTTP server span as its root, the call's begin under it, the stock and
// payment steps under the begin, one of them deciding the attempt, and
// the answer (the server span's end) after both steps began.
func TestJaeger_checkoutRequestThroughTheSaga(t *testing.T) {
	jaeger := testenv.JaegerServer(t)
	bin := buildBinary(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", jaeger.OTLP)
	t.Setenv("OTEL_TRACES_SAMPLER", "always_on")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "200")
	service := "dropstream-e2e-checkout-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	t.Setenv("OTEL_SERVICE_NAME", service)
	api := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	stages := []string{"checkout-stock", "checkout-payment"}
	startProc(t, bin, "checkout", "run", "--redis-url", testenv.RedisURL(t), "--api-addr", api,
		"--stages", strings.Join(stages, ",")).waitStarted(t, stages...)
	base := "http://" + api

	var item struct {
		ItemID string `json:"item_id"`
	}
	checkoutCall(t, base, "/stock/item/create/10", &item)
	checkoutCall(t, base, "/stock/add/"+item.ItemID+"/3", nil)
	var user struct {
		UserID string `json:"user_id"`
	}
	checkoutCall(t, base, "/payment/create_user", &user)
	checkoutCall(t, base, "/payment/add_funds/"+user.UserID+"/100", nil)
	var order struct {
		OrderID string `json:"order_id"`
	}
	checkoutCall(t, base, "/orders/create/"+user.UserID, &order)
	checkoutCall(t, base, "/orders/addItem/"+order.OrderID+"/"+item.ItemID, nil)
	if status := checkoutCall(t, base, "/orders/checkout/"+order.OrderID, nil); status != http.StatusOK {
		t.Fatalf("checkout = %d, want 200", status)
	}

	var traces []jaegerTrace
	testenv.WaitFor(t, 30*time.Second, func() bool {
		q := url.Values{"service": {service}, "operation": {"POST /orders/checkout/:order_id"}, "limit": {"10"}, "lookback": {"1h"}}
		traces = jaegerGet(t, jaeger.Query, "/api/traces?"+q.Encode())
		if len(traces) != 1 {
			return false
		}
		steps := 0
		for _, s := range traces[0].Spans {
			if s.OperationName == "checkout.stock" || s.OperationName == "checkout.payment" {
				steps++
			}
		}
		return steps == 2 // the saga's last spans: the trace is whole
	}, "the checkout request's whole trace in Jaeger")
	spans, _ := otlpSpans(t, traces)
	ix := indexSpans(spans)
	var dump []string
	for _, s := range spans {
		dump = append(dump, fmt.Sprintf("%s [%s] %v", s.Name, s.Kind, ix.path(s)))
	}
	sort.Strings(dump)
	t.Logf("checkout trace:\n  %s", strings.Join(dump, "\n  "))
	var root *tracepb.Span
	for _, s := range spans {
		if len(s.ParentSpanId) == 0 {
			if root != nil {
				t.Fatalf("two roots: %q and %q", root.Name, s.Name)
			}
			root = s
		} else if ix.parent(s) == nil {
			t.Errorf("span %q has a parent %x that was not exported", s.Name, s.ParentSpanId)
		}
	}
	if root == nil || root.Name != "POST /orders/checkout/:order_id" || root.Kind != tracepb.Span_SPAN_KIND_SERVER ||
		attr(root, "http.response.status_code") != "200" {
		t.Fatalf("root span %v: want the server span POST /orders/checkout/:order_id answering 200", root)
	}
	// The saga as the trace shows it: the call begins the attempt and
	// sends the stock and payment steps, each step records its answer in
	// the saga and the last one decides; the request answers once the
	// steps have run.
	want := map[string]string{
		"checkout.begin":   "POST /orders/checkout/:order_id > checkout.begin",
		"checkout.stock":   "POST /orders/checkout/:order_id > checkout.begin > checkout.stock",
		"checkout.payment": "POST /orders/checkout/:order_id > checkout.begin > checkout.payment",
	}
	seen := map[string]int{}
	statuses := map[string]int{}
	for _, s := range spans {
		p := strings.Join(ix.path(s), " > ")
		if w, ok := want[s.Name]; ok {
			seen[s.Name]++
			if p != w {
				t.Errorf("span %q at %s, want %s", s.Name, p, w)
			}
		}
		if s.Name == "checkout.stock" || s.Name == "checkout.payment" {
			statuses[attr(s, "checkout.saga_status")]++
		}
		// The answer reports what the steps did: both ran before it.
		if (s.Name == "checkout.stock" || s.Name == "checkout.payment") && s.StartTimeUnixNano > root.EndTimeUnixNano {
			t.Errorf("the request answered (%d) before step %s began (%d)", root.EndTimeUnixNano, s.Name, s.StartTimeUnixNano)
		}
	}
	for name := range want {
		if seen[name] != 1 {
			t.Errorf("%d spans %q in the checkout's trace, want 1", seen[name], name)
		}
	}
	if statuses["pending"] != 1 || statuses["succeeded"] != 1 {
		t.Errorf("saga status after each step %v, want one pending and one succeeded (the step that decided)", statuses)
	}
}
