package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// syncBuffer is a bytes.Buffer safe for concurrent writers and readers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// records decodes the JSON log lines written so far.
func (b *syncBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(b.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// newTestServer returns a Server built from cfg with a JSON debug logger
// writing to the returned buffer.
func newTestServer(t *testing.T, cfg Config) (*Server, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s, logs
}

type response struct {
	status int
	header http.Header
	body   []byte
}

// do runs req through the app in memory, without a timeout.
func do(t *testing.T, s *Server, req *http.Request) response {
	t.Helper()
	res, err := s.App().Test(req, -1)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return response{status: res.StatusCode, header: res.Header, body: body}
}

func get(t *testing.T, s *Server, path string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return do(t, s, req)
}

// wantEnvelope asserts r is a JSON error envelope with status and code.
func wantEnvelope(t *testing.T, r response, status int, code string) envelopeError {
	t.Helper()
	if r.status != status {
		t.Errorf("status = %d, want %d (body %s)", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var env struct {
		Error *envelopeError `json:"error"`
	}
	if err := json.Unmarshal(r.body, &env); err != nil || env.Error == nil {
		t.Fatalf("body %s is not an error envelope (err %v)", r.body, err)
	}
	if env.Error.Code != code {
		t.Errorf("code = %q, want %q (message %q)", env.Error.Code, code, env.Error.Message)
	}
	if env.Error.Message == "" {
		t.Errorf("empty message in %s", r.body)
	}
	return *env.Error
}

// RequestIDFromContext returns the request id carried by ctx, such as
// c.UserContext() inside a handler, or "".
func RequestIDFromContext(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// Validate reports the first problem of c, wrapped around [ErrInvalidConfig].
func (c Config) Validate() error {
	_, err := c.validate()
	return err
}
