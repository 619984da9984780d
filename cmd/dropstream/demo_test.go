package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/testenv"
)

// get returns the status and body of GET url, or status 0 on a transport
// error (the server may not listen yet).
func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	c := &http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil
	}
	return resp.StatusCode, body
}

// series returns the metrics of a family whose labels include every label of
// want.
func series(families map[string]*dto.MetricFamily, name string, want map[string]string) []*dto.Metric {
	f := families[name]
	if f == nil {
		return nil
	}
	var out []*dto.Metric
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		ok := true
		for k, v := range want {
			if have[k] != v {
				ok = false
			}
		}
		if ok {
			out = append(out, m)
		}
	}
	return out
}

var readmeCreateRe = regexp.MustCompile(`curl -XPOST -H 'content-type: application/json' localhost:8080(/v1/[a-z]+) -d '([^']*)'`)

type readmeExample struct{ path, body string }

// readmeCreates returns the README's examples of creating a source, a
// watcher and a subscriber, which the demo must accept as written.
func readmeCreates(t *testing.T) []readmeExample {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []readmeExample
	seen := map[string]bool{}
	for _, m := range readmeCreateRe.FindAllStringSubmatch(string(b), -1) {
		out = append(out, readmeExample{path: m[1], body: m[2]})
		seen[m[1]] = true
	}
	for _, want := range []string{"/v1/sources", "/v1/watchers", "/v1/subscribers"} {
		if !seen[want] {
			t.Errorf("README has no example creating %s", want)
		}
	}
	return out
}

func TestDemo_servesAPIMetricsAndStatusUntilCancelled(t *testing.T) {
	clearEnv(t) // DROPSTREAM_REDIS_URL unset: embedded Redis
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	base := "http://" + addr
	demo := startDispatch(t, "demo", "--api-addr", addr, "--tick", "200ms", "--interval", "1s", "--churn", "0.2", "--status-every", "100ms")

	demo.waitFor(t, 20*time.Second, func() bool {
		status, body := get(t, base+"/readyz")
		if status != http.StatusOK {
			return false
		}
		var r struct {
			Status string `json:"status"`
		}
		return json.Unmarshal(body, &r) == nil && r.Status == "ready"
	}, "/readyz to answer 200 ready")

	// Every flow runs and seeds its demo data on the embedded Redis beside the
	// availability pipeline; under -race on 2 loaded cores the first
	// notification can take most of a minute.
	demo.waitFor(t, 90*time.Second, func() bool {
		status, body := get(t, base+"/metrics")
		if status != http.StatusOK {
			return false
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
		if err != nil {
			t.Fatalf("/metrics is not Prometheus text: %v", err)
		}
		for _, stage := range []string{"avail-normalizer", "avail-diff", "avail-projection", "avail-notifier"} {
			acked := series(families, "dropstream_stage_messages_total", map[string]string{"stage": stage, "outcome": "acked"})
			if len(acked) != 1 || acked[0].GetCounter().GetValue() < 20 {
				return false
			}
			if len(series(families, "dropstream_stage_lag", map[string]string{"stage": stage})) != 1 {
				return false
			}
		}
		sent := series(families, "dropstream_notifier_notifications_total", map[string]string{"outcome": "sent"})
		return len(sent) == 1 && sent[0].GetCounter().GetValue() >= 1
	}, "/metrics to show every availability stage's throughput and lag, and notifications sent")

	status, body := get(t, base+"/v1/availability?state=open&limit=5")
	var page struct {
		Items []struct {
			Key, State string
		} `json:"items"`
	}
	if status != http.StatusOK || json.Unmarshal(body, &page) != nil || len(page.Items) == 0 || page.Items[0].State != "open" {
		t.Errorf("GET /v1/availability?state=open = %d %s, want open entities", status, body)
	}

	for _, ex := range readmeCreates(t) {
		resp, err := http.Post(base+ex.path, "application/json", strings.NewReader(ex.body))
		if err != nil {
			t.Fatalf("README example POST %s: %v", ex.path, err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Errorf("README example POST %s = %d %s, want 201", ex.path, resp.StatusCode, got)
		}
	}

	// The demo's feed server, on loopback, is allowed by the egress policy:
	// its feed is polled.
	demo.waitFor(t, 30*time.Second, func() bool {
		status, body := get(t, base+"/v1/feeds")
		var feeds struct {
			Items []struct {
				LastPoll *struct {
					OK bool `json:"ok"`
				} `json:"last_poll"`
			} `json:"items"`
		}
		return status == http.StatusOK && json.Unmarshal(body, &feeds) == nil && len(feeds.Items) == 1 &&
			feeds.Items[0].LastPoll != nil && feeds.Items[0].LastPoll.OK
	}, "the demo feed polled")

	out := demo.stdout.String()
	// stdout is no terminal here: it gets no status line, and the console's
	// address comes first.
	if strings.Contains(out, "| observations ") {
		t.Errorf("a status line on stdout, which is no terminal:\n%s", out)
	}
	if !strings.HasPrefix(out, "dropstream demo: console on http://"+addr+"/console\n") {
		t.Errorf("stdout does not begin with the console's address:\n%s", out)
	}
	if !strings.Contains(out, "API on "+addr) {
		t.Errorf("stdout does not announce the API address:\n%s", out)
	}
	// The demo logs warnings only by default: no info line among them.
	if strings.Contains(demo.stderr.String(), "level=INFO") {
		t.Errorf("the demo logs at info by default:\n%s", demo.stderr.String())
	}
	if !strings.Contains(demo.stderr.String(), "embedded in-process Redis") {
		t.Errorf("stderr does not warn about the embedded Redis:\n%s", demo.stderr.String())
	}
	// The embedded Redis wants the password the demo shows on its own
	// output, and the logs never show it.
	_, redisURL, ok := strings.Cut(out, "(redis-cli -u ")
	redisURL, _, _ = strings.Cut(redisURL, ")")
	u, err := url.Parse(redisURL)
	if !ok || err != nil {
		t.Fatalf("stdout does not show the embedded Redis URL:\n%s", out)
	}
	password, _ := u.User.Password()
	if len(password) < 32 || strings.Contains(demo.stderr.String(), password) {
		t.Errorf("embedded Redis password %q: want a random one, absent from the logs", password)
	}
	anon := redis.NewClient(&redis.Options{Addr: u.Host})
	defer anon.Close()
	if err := anon.Ping(t.Context()).Err(); err == nil {
		t.Error("the embedded Redis answers a client without its password")
	}
	if err := testenv.Dial(t, redisURL).Ping(t.Context()).Err(); err != nil {
		t.Errorf("PING with the shown URL: %v", err)
	}
	if err := demo.stop(t); err != nil {
		t.Fatalf("demo returned %v after cancellation, want nil\nstderr:\n%s", err, demo.stderr)
	}
	if status, _ := get(t, base+"/healthz"); status != 0 {
		t.Errorf("API still answers (%d) after demo returned", status)
	}
}

func TestStatusLine_namesEachFigure(t *testing.T) {
	m := map[string]float64{"dropstream_diff_runs_total": 12, "dropstream_diff_observations_total": 340,
		"dropstream_diff_transitions_total": 56, `dropstream_notifier_notifications_total{outcome="sent"}`: 7, "dropstream_dlq_length": 2}
	want := "runs 12 | observations 340 | transitions 56 | notifications 7 | lag 3 | dlq 2"
	if got := statusLine(m, 3); got != want {
		t.Errorf("statusLine = %q, want %q", got, want)
	}
}
