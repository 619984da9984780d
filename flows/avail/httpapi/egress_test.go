package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/api/apitest"
	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/collector"
	"github.com/dropstream/dropstream/internal/egress/egresstest"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// deniedURLs are URLs whose host is an address the default policy denies.
var deniedURLs = []string{"http://127.0.0.1:8080", "http://169.254.169.254/latest/meta-data", "http://[::ffff:127.0.0.1]:9000",
	"https://10.0.0.5", "http://192.168.1.10:8443/x", "http://[::1]/", "http://100.100.100.100/"}

func TestSourceRoutes_baseURLOnADeniedAddressRefused(t *testing.T) {
	srv, _, _ := routesServer(t)
	for _, u := range deniedURLs {
		body := `{"id":"internal","provider":"resy","base_url":"` + u + `","interval":"90s",
			"scopes":[{"venue":"1505","date":"2026-12-01","party_size":2}]}`
		var e envelopeOut
		if code := call(t, srv, "POST", "/v1/sources", "w", body, &e); code != http.StatusUnprocessableEntity ||
			e.Error.Code != "invalid_source" || !strings.Contains(e.Error.Message, "base_url") || !strings.Contains(e.Error.Message, "denied") {
			t.Errorf("POST source at %s: %d %+v, want 422 invalid_source naming base_url", u, code, e.Error)
		}
	}
	var e envelopeOut
	if code := call(t, srv, "GET", "/v1/sources/internal", "r", "", &e); code != http.StatusNotFound {
		t.Errorf("GET the refused source: %d, want 404", code)
	}
}

func TestWatcherRoutes_webhookOnADeniedAddressRefused(t *testing.T) {
	srv, _, _ := routesServer(t)
	for _, u := range deniedURLs {
		body := `{"name":"w","channel":"webhook","webhook_url":"` + u + `/hook"}`
		var e envelopeOut
		if code := call(t, srv, "POST", "/v1/watchers", "w", body, &e); code != http.StatusUnprocessableEntity ||
			e.Error.Code != "invalid_watcher" || !strings.Contains(e.Error.Message, "webhook_url") {
			t.Errorf("POST watcher to %s: %d %+v, want 422 invalid_watcher naming webhook_url", u, code, e.Error)
		}
	}
	var page struct{ Items []map[string]any }
	if code := call(t, srv, "GET", "/v1/watchers", "r", "", &page); code != http.StatusOK || len(page.Items) != 0 {
		t.Errorf("GET /v1/watchers: %d, %d watchers, want none", code, len(page.Items))
	}
}

// A provider answering 500 with a secret-looking body: the source's health
// shows the status and the class, never the body.
func TestSourceRoutes_healthKeepsStatusAndClassNotTheBody(t *testing.T) {
	const secret = "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG db01.corp.internal"
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, secret)
	}))
	t.Cleanup(provider.Close)
	rdb, err := stream.Dial(context.Background(), testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	// The test's provider is on loopback: the policy allows it by host:port.
	policy := egresstest.Allow(t, provider.URL)
	col, err := collector.NewCollector(avail.NewTopics(1), stream.NewPublisher(rdb, stream.Telemetry{}),
		collector.CollectorConfig{NoJitter: true, Egress: policy})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = col.Close() })
	srv, _ := apitest.NewServer(t, api.Config{})
	SourceRoutes{Store: collector.NewStore(rdb), Collector: col, Egress: policy}.Register(srv)
	body := `{"id":"leaky","provider":"resy","base_url":"` + provider.URL + `","interval":"90s",
		"scopes":[{"venue":"1505","date":"2026-12-01","party_size":2}]}`
	if code := call(t, srv, "POST", "/v1/sources", "", body, nil); code != http.StatusCreated {
		t.Fatalf("POST source: %d", code)
	}
	if err := col.PollOnce(context.Background(), "leaky"); err != nil {
		t.Fatal(err)
	}
	resp := apitest.Request(t, srv, "GET", "/v1/sources/leaky", nil)
	var one struct {
		Health *collector.SourceHealth `json:"health"`
	}
	if err := json.Unmarshal(resp.Body, &one); err != nil || resp.Status != http.StatusOK || one.Health == nil {
		t.Fatalf("GET source: %d %s", resp.Status, resp.Body)
	}
	if strings.Contains(string(resp.Body), "AWS_SECRET") || strings.Contains(string(resp.Body), "db01") {
		t.Errorf("GET source reads back the provider's body: %s", resp.Body)
	}
	if e := one.Health.LastError; !strings.Contains(e, "HTTP 500") || !strings.Contains(e, "http_5xx") {
		t.Errorf("last error %q, want the status and the class", e)
	}
}
