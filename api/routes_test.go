package api

import (
	"encoding/json"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

// call sends a request with an API key and decodes a JSON answer into out.
func call(t *testing.T, srv *Server, method, path, key, body string, out any) int {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set(HeaderAPIKey, key)
	resp, err := srv.App().Test(req, 10000)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, raw, err)
		}
	}
	return resp.StatusCode
}

type envelopeOut struct {
	Error struct{ Code, Message string } `json:"error"`
}
