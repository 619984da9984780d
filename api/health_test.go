package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestHealthz_alwaysOK(t *testing.T) {
	failing := ReadinessCheck{Name: "redis", Check: func(context.Context) error { return errors.New("down") }}
	s, _ := newTestServer(t, Config{APIKeys: "k:read", Checks: []ReadinessCheck{failing}})

	r := get(t, s, "/healthz")
	if r.status != http.StatusOK {
		t.Fatalf("status = %d, want 200", r.status)
	}
	if got := strings.TrimSpace(string(r.body)); got != `{"status":"ok"}` {
		t.Errorf("body = %s", got)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type = %q", ct)
	}
}

func TestReadyz_reportsEveryCheck(t *testing.T) {
	ok := func(context.Context) error { return nil }
	blockUntilTestEnds := make(chan struct{})
	t.Cleanup(func() { close(blockUntilTestEnds) })

	tests := []struct {
		name       string
		checks     []ReadinessCheck
		timeout    time.Duration
		wantStatus int
		wantBody   string            // status field
		wantChecks map[string]string // exact checks object, when not nil
		wantFailed []string          // checks that must report some error text
	}{
		{
			name:       "no checks",
			wantStatus: http.StatusOK, wantBody: "ready",
			wantChecks: map[string]string{},
		},
		{
			name:       "all pass",
			checks:     []ReadinessCheck{{"redis", ok}, {"clickhouse", ok}},
			wantStatus: http.StatusOK, wantBody: "ready",
			wantChecks: map[string]string{"redis": "ok", "clickhouse": "ok"},
		},
		{
			name: "one fails",
			checks: []ReadinessCheck{
				{"redis", ok},
				{"clickhouse", func(context.Context) error { return errors.New("dial tcp: connection refused") }},
			},
			wantStatus: http.StatusServiceUnavailable, wantBody: "unready",
			wantChecks: map[string]string{"redis": "ok", "clickhouse": "dial tcp: connection refused"},
		},
		{
			name: "check honouring the deadline",
			checks: []ReadinessCheck{{"slow", func(ctx context.Context) error {
				<-ctx.Done()
				return ctx.Err()
			}}},
			timeout:    20 * time.Millisecond,
			wantStatus: http.StatusServiceUnavailable, wantBody: "unready",
			wantFailed: []string{"slow"},
		},
		{
			name: "check ignoring the deadline",
			checks: []ReadinessCheck{{"stuck", func(context.Context) error {
				<-blockUntilTestEnds
				return nil
			}}},
			timeout:    20 * time.Millisecond,
			wantStatus: http.StatusServiceUnavailable, wantBody: "unready",
			wantChecks: map[string]string{"stuck": "no answer: context deadline exceeded"},
		},
		{
			name:       "check panics",
			checks:     []ReadinessCheck{{"boom", func(context.Context) error { panic("nil map") }}},
			wantStatus: http.StatusServiceUnavailable, wantBody: "unready",
			wantChecks: map[string]string{"boom": "check panicked: nil map"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newTestServer(t, Config{Checks: tt.checks, ReadyTimeout: tt.timeout})
			r := get(t, s, "/readyz")
			if r.status != tt.wantStatus {
				t.Errorf("status = %d, want %d", r.status, tt.wantStatus)
			}
			var body struct {
				Status string             `json:"status"`
				Checks *map[string]string `json:"checks"`
			}
			if err := json.Unmarshal(r.body, &body); err != nil {
				t.Fatalf("body %s: %v", r.body, err)
			}
			if body.Status != tt.wantBody {
				t.Errorf("status field = %q, want %q", body.Status, tt.wantBody)
			}
			if body.Checks == nil {
				t.Fatalf("no checks object in %s", r.body)
			}
			if tt.wantChecks != nil && !reflect.DeepEqual(*body.Checks, tt.wantChecks) {
				t.Errorf("checks = %v, want %v", *body.Checks, tt.wantChecks)
			}
			for _, name := range tt.wantFailed {
				if got := (*body.Checks)[name]; got == "" || got == "ok" {
					t.Errorf("check %q = %q, want an error text", name, got)
				}
			}
		})
	}
}

func TestMetrics_servedWithoutKey(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write([]byte("dropstream_up 1\n"))
	})
	tests := []struct {
		name       string
		handler    http.Handler
		wantStatus int
	}{
		{"handler configured", metrics, http.StatusOK},
		{"no handler", nil, http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newTestServer(t, Config{APIKeys: "k:admin", MetricsHandler: tt.handler})
			r := get(t, s, "/metrics")
			if r.status != tt.wantStatus {
				t.Fatalf("status = %d, want %d (%s)", r.status, tt.wantStatus, r.body)
			}
			if tt.wantStatus == http.StatusOK && string(r.body) != "dropstream_up 1\n" {
				t.Errorf("body = %q", r.body)
			}
		})
	}
}
