// Package apitest serves the tests of every package that registers routes
// on an api.Server: an in-memory server with captured logs, requests
// checked against the server's OpenAPI document, and checks of the JSON
// error envelope.
package apitest

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/dropstream/dropstream/api"
)

// Logs is a buffer of JSON log lines, safe for concurrent writers and
// readers.
type Logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Logs) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Logs) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Records decodes the JSON log lines written so far.
func (b *Logs) Records(t testing.TB) []map[string]any {
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

// NewServer returns a Server built from cfg, with a JSON debug logger
// writing to the returned Logs unless cfg has a logger.
func NewServer(t testing.TB, cfg api.Config) (*api.Server, *Logs) {
	t.Helper()
	logs := &Logs{}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	s, err := api.New(cfg)
	if err != nil {
		t.Fatalf("api.New: %v", err)
	}
	return s, logs
}

// Response is an answer read whole.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into v, failing the test when it does not decode.
func (r Response) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("body %s: %v", r.Body, err)
	}
}

// Do runs req through the server in memory, without a timeout, and checks
// the exchange against the server's OpenAPI document (Contract.Check):
// the test fails when they do not match.
func Do(t testing.TB, s *api.Server, req *http.Request) Response {
	t.Helper()
	var reqBody []byte
	if req.Body != nil {
		var err error
		if reqBody, err = io.ReadAll(req.Body); err != nil {
			t.Fatalf("read request body: %v", err)
		}
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	res, err := s.App().Test(req, -1)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	out := Response{Status: res.StatusCode, Header: res.Header, Body: body}
	if err := Document(t, s).Check(req.Context(), req, reqBody, out); err != nil {
		t.Errorf("OpenAPI contract: %v", err)
	}
	return out
}

// Request runs method path with body (JSON-encoded unless it is a string,
// []byte or nil) and the given headers ("key", "value" pairs).
func Request(t testing.TB, s *api.Server, method, path string, body any, headers ...string) Response {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	case []byte:
		r = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, path, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return Do(t, s, req)
}

// Get runs GET path.
func Get(t testing.TB, s *api.Server, path string) Response {
	t.Helper()
	return Request(t, s, http.MethodGet, path, nil)
}

// Envelope is the error object of the JSON error envelope.
type Envelope struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// WantEnvelope asserts r is a JSON error envelope with status and code and
// a message, and returns it.
func WantEnvelope(t testing.TB, r Response, status int, code string) Envelope {
	t.Helper()
	if r.Status != status {
		t.Errorf("status = %d, want %d (body %s)", r.Status, status, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var env struct {
		Error *Envelope `json:"error"`
	}
	if err := json.Unmarshal(r.Body, &env); err != nil || env.Error == nil {
		t.Fatalf("body %s is not an error envelope (err %v)", r.Body, err)
	}
	if env.Error.Code != code {
		t.Errorf("code = %q, want %q (message %q)", env.Error.Code, code, env.Error.Message)
	}
	if env.Error.Message == "" {
		t.Errorf("empty message in %s", r.Body)
	}
	return *env.Error
}
