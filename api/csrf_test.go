package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gofiber/fiber/v2"
)

// Every simple request a browser sends without a preflight (text/plain, a
// form, multipart, no body), on every state-changing method, is refused
// when the browser names another site (Origin, or Sec-Fetch-Site without
// it), and passes when it names the same origin or none; reads always pass.
func TestCSRF_simpleRequestsFromAnotherSiteAreRefused(t *testing.T) {
	s, _ := newTestServer(t, Config{})
	var reached atomic.Int64
	h := func(c *fiber.Ctx) error { reached.Add(1); return c.SendStatus(http.StatusNoContent) }
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		s.App().Add(m, "/v1/admin/stages/:stage/pause", h)
	}
	const host = "api.example:8080"

	bodies := []struct {
		name, contentType, body string
	}{
		{"text/plain", "text/plain;charset=UTF-8", `{"x":1}`},
		{"form", "application/x-www-form-urlencoded", "x=1"},
		{"multipart", "multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; name=\"x\"\r\n\r\n1\r\n--b--\r\n"},
		{"no body", "", ""},
	}
	origins := []struct {
		name    string
		headers map[string]string
		refused bool
	}{
		{"foreign Origin", map[string]string{"Origin": "https://evil.example"}, true},
		{"foreign Origin on the same host name, other port", map[string]string{"Origin": "http://api.example:9999"}, true},
		{"Origin null", map[string]string{"Origin": "null"}, true},
		{"Sec-Fetch-Site cross-site", map[string]string{"Sec-Fetch-Site": "cross-site"}, true},
		{"Sec-Fetch-Site same-site", map[string]string{"Sec-Fetch-Site": "same-site"}, true},
		{"same origin", map[string]string{"Origin": "http://" + host, "Sec-Fetch-Site": "same-origin"}, false},
		{"same origin behind a proxy", map[string]string{"Origin": "https://public.example", "X-Forwarded-Host": "public.example"}, false},
		{"no Origin", nil, false},
		{"Sec-Fetch-Site none (typed by the user)", map[string]string{"Sec-Fetch-Site": "none"}, false},
	}
	for _, method := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		for _, b := range bodies {
			for _, o := range origins {
				t.Run(method+"/"+b.name+"/"+o.name, func(t *testing.T) {
					req := httptest.NewRequest(method, "/v1/admin/stages/sink/pause", strings.NewReader(b.body))
					req.Host = host
					if b.contentType != "" {
						req.Header.Set("Content-Type", b.contentType)
					}
					for k, v := range o.headers {
						req.Header.Set(k, v)
					}
					before := reached.Load()
					r := do(t, s, req)
					if !o.refused {
						if r.status != http.StatusNoContent || reached.Load() != before+1 {
							t.Fatalf("status %d, handler reached %v; want it passed", r.status, reached.Load() > before)
						}
						return
					}
					if reached.Load() != before {
						t.Fatal("the handler ran for a cross-site request")
					}
					var env struct {
						Error struct{ Code string } `json:"error"`
					}
					if r.status != http.StatusForbidden || json.Unmarshal(r.body, &env) != nil || env.Error.Code != "cross_site" {
						t.Fatalf("%d %s, want 403 cross_site", r.status, r.body)
					}
				})
			}
		}
	}

	// A request a page can only send after a preflight passes whatever its
	// origin; so does every read.
	for _, tc := range []struct {
		name, method string
		headers      map[string]string
	}{
		{"JSON body", "POST", map[string]string{"Content-Type": "application/json"}},
		{"JSON suffix type", "PUT", map[string]string{"Content-Type": "application/merge-patch+json; charset=utf-8"}},
		{"X-Requested-With", "POST", map[string]string{"X-Requested-With": "XMLHttpRequest"}},
		{"API key header", "DELETE", map[string]string{HeaderAPIKey: "k"}},
		{"Authorization", "PATCH", map[string]string{"Authorization": "Bearer k"}},
		{"a read", "GET", nil},
	} {
		t.Run("cross-site "+tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, "/v1/admin/stages/sink/pause", strings.NewReader("{}"))
			req.Host = host
			req.Header.Set("Origin", "https://evil.example")
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			if r := do(t, s, req); r.status != http.StatusNoContent {
				t.Fatalf("%d %s, want it passed", r.status, r.body)
			}
		})
	}
}
