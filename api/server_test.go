package api

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
)

// startServer serves s on 127.0.0.1:0 until the test ends and returns its
// base URL. The 413 path needs a real connection: app.Test reports an
// oversized body as an error instead of returning the response.
func startServer(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := serve(func() error { return s.Serve(ctx, ln) })
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

// doHTTP sends req over the network and reads the whole response.
func doHTTP(t *testing.T, req *http.Request) response {
	t.Helper()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: body}
}

func TestServer_fiberErrorsUseEnvelope(t *testing.T) {
	s, logs := newTestServer(t, Config{BodyLimit: 16})
	s.App().Post("/things", func(c *fiber.Ctx) error { return c.SendStatus(http.StatusCreated) })
	base := startServer(t, s)

	tests := []struct {
		name       string
		method     string
		path       string
		body       string
		wantStatus int
		wantCode   string
	}{
		{"unknown route", http.MethodGet, "/nope", "", http.StatusNotFound, "not_found"},
		{"wrong method", http.MethodDelete, "/things", "", http.StatusMethodNotAllowed, "method_not_allowed"},
		{"body over limit", http.MethodPost, "/things", strings.Repeat("x", 17), http.StatusRequestEntityTooLarge, "payload_too_large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, base+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			r := doHTTP(t, req)
			e := wantEnvelope(t, r, tt.wantStatus, tt.wantCode)
			if tt.wantStatus == http.StatusNotFound && e.Message != "no route for GET /nope" {
				t.Errorf("404 message = %q", e.Message)
			}
			if tt.wantStatus == http.StatusRequestEntityTooLarge && !strings.Contains(e.Message, "16 bytes") {
				t.Errorf("413 message %q does not name the limit", e.Message)
			}
			id := r.header.Get(HeaderRequestID)
			if id == "" {
				t.Error("no X-Request-Id on the error response")
			}
			var logged bool
			for _, rec := range logs.records(t) {
				logged = logged || rec["msg"] == "http request" && rec["request_id"] == id && rec["status"] == float64(tt.wantStatus)
			}
			if !logged {
				t.Errorf("no access log record for request %s; logs:\n%s", id, logs)
			}
		})
	}

	t.Run("body at limit passes", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, base+"/things", strings.NewReader(strings.Repeat("x", 16)))
		if r := doHTTP(t, req); r.status != http.StatusCreated {
			t.Errorf("status = %d, want 201 (%s)", r.status, r.body)
		}
	})
}

func TestNew_warnsWhenOpen(t *testing.T) {
	tests := []struct {
		name     string
		keys     string
		wantWarn bool
	}{
		{"no keys", "", true},
		{"keys", "k:read", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, logs := newTestServer(t, Config{APIKeys: tt.keys})
			got := strings.Contains(logs.String(), `"level":"WARN","msg":"API is open: DROPSTREAM_API_KEYS is empty`)
			if got != tt.wantWarn {
				t.Errorf("open-API warning logged = %v, want %v; logs:\n%s", got, tt.wantWarn, logs)
			}
		})
	}
}

func TestNew_rejectsInvalidConfig(t *testing.T) {
	_, err := New(Config{APIKeys: "k:root"})
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New error = %v, want ErrInvalidConfig", err)
	}
}

// serve starts run in a goroutine and returns a channel with its result.
func serve(run func() error) <-chan error {
	done := make(chan error, 1)
	go func() { done <- run() }()
	return done
}

func getBody(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(b)
}

func TestListen_servesUntilContextCancelled(t *testing.T) {
	s, _ := newTestServer(t, Config{Addr: "127.0.0.1:0"})
	if s.Addr() != "" {
		t.Fatalf("Addr before listening = %q, want empty", s.Addr())
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := serve(func() error { return s.Listen(ctx) })
	select {
	case <-s.Listening():
	case err := <-done:
		t.Fatalf("Listen: %v", err)
	}

	addr := s.Addr()
	if host, port, err := net.SplitHostPort(addr); err != nil || host != "127.0.0.1" || port == "0" {
		t.Fatalf("Addr = %q, want 127.0.0.1:<port>", addr)
	}
	if status, body := getBody(t, "http://"+addr+"/healthz"); status != http.StatusOK || body != `{"status":"ok"}` {
		t.Fatalf("GET /healthz = %d %s", status, body)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Listen returned %v after cancellation, want nil", err)
	}
	if _, err := http.Get("http://" + addr + "/healthz"); err == nil {
		t.Error("server still answers after shutdown")
	}
	if err := s.Listen(t.Context()); !errors.Is(err, ErrServerStarted) {
		t.Errorf("second Listen = %v, want ErrServerStarted", err)
	}
}
