package api

import (
	"net/http"
	"testing"

	"github.com/gofiber/fiber/v2"
)

// scopedServer has GET /v1/things (read), POST /v1/things (write) and
// DELETE /v1/things (admin), all on the shared /v1 prefix.
func scopedServer(t *testing.T, keys string) *Server {
	t.Helper()
	s, _ := newTestServer(t, Config{APIKeys: keys})
	ok := func(c *fiber.Ctx) error { return c.SendStatus(http.StatusNoContent) }
	s.Group("/v1", ScopeRead).Get("/things", ok)
	s.Group("/v1", ScopeWrite).Post("/things", ok)
	s.Group("/v1", ScopeAdmin).Delete("/things", ok)
	return s
}

func TestAuth_scopes(t *testing.T) {
	const keys = "r-key:read; w-key:write ;a-key:admin;rw-key:read,write"
	tests := []struct {
		name       string
		keys       string
		method     string
		header     string // header name; "" sends no key
		value      string
		wantStatus int
		wantCode   string
	}{
		{"no key", keys, http.MethodGet, "", "", http.StatusUnauthorized, "unauthenticated"},
		{"bad key", keys, http.MethodGet, "Authorization", "Bearer nope", http.StatusUnauthorized, "unauthenticated"},
		{"prefix of a key", keys, http.MethodGet, "Authorization", "Bearer r-ke", http.StatusUnauthorized, "unauthenticated"},
		{"basic auth is no key", keys, http.MethodGet, "Authorization", "Basic ci1rZXk6", http.StatusUnauthorized, "unauthenticated"},
		{"read key on read route", keys, http.MethodGet, "Authorization", "Bearer r-key", http.StatusNoContent, ""},
		{"lower-case bearer", keys, http.MethodGet, "Authorization", "bearer r-key", http.StatusNoContent, ""},
		{"X-API-Key header", keys, http.MethodGet, HeaderAPIKey, "r-key", http.StatusNoContent, ""},
		{"read key on write route", keys, http.MethodPost, "Authorization", "Bearer r-key", http.StatusForbidden, "forbidden"},
		{"write key on write route", keys, http.MethodPost, HeaderAPIKey, "w-key", http.StatusNoContent, ""},
		{"read,write key on write route", keys, http.MethodPost, HeaderAPIKey, "rw-key", http.StatusNoContent, ""},
		{"write key on read route", keys, http.MethodGet, HeaderAPIKey, "w-key", http.StatusNoContent, ""},
		{"write key on admin route", keys, http.MethodDelete, HeaderAPIKey, "w-key", http.StatusForbidden, "forbidden"},
		{"admin key on write route", keys, http.MethodPost, "Authorization", "Bearer a-key", http.StatusNoContent, ""},
		{"admin key on admin route", keys, http.MethodDelete, "Authorization", "Bearer a-key", http.StatusNoContent, ""},
		{"open mode read", "", http.MethodGet, "", "", http.StatusNoContent, ""},
		{"open mode write", "", http.MethodPost, "", "", http.StatusNoContent, ""},
		{"open mode admin with junk key", "", http.MethodDelete, "Authorization", "Bearer junk", http.StatusNoContent, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := scopedServer(t, tt.keys)
			req, _ := http.NewRequest(tt.method, "/v1/things", nil)
			if tt.header != "" {
				req.Header.Set(tt.header, tt.value)
			}
			r := do(t, s, req)
			if tt.wantCode == "" {
				if r.status != tt.wantStatus {
					t.Fatalf("status = %d, want %d (%s)", r.status, tt.wantStatus, r.body)
				}
				return
			}
			wantEnvelope(t, r, tt.wantStatus, tt.wantCode)
			if tt.wantStatus == http.StatusUnauthorized && r.header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}
}

func TestGroup_unknownPathUnderScopedPrefixIs404(t *testing.T) {
	s := scopedServer(t, "k:read")
	wantEnvelope(t, get(t, s, "/v1/unknown"), http.StatusNotFound, "not_found")
}

func TestGroup_callerScopeInLocals(t *testing.T) {
	s, _ := newTestServer(t, Config{APIKeys: "w:write"})
	var got Scope
	var ok bool
	s.Group("/v1", ScopeRead).Route("/nested", func(r fiber.Router) {
		r.Get("/x", func(c *fiber.Ctx) error {
			got, ok = CallerScope(c)
			return c.SendStatus(http.StatusNoContent)
		})
	})
	if r := get(t, s, "/v1/nested/x"); r.status != http.StatusUnauthorized {
		t.Fatalf("route registered through Route is not guarded: status %d", r.status)
	}
	req, _ := http.NewRequest(http.MethodGet, "/v1/nested/x", nil)
	req.Header.Set(HeaderAPIKey, "w")
	if r := do(t, s, req); r.status != http.StatusNoContent {
		t.Fatalf("status = %d (%s)", r.status, r.body)
	}
	if !ok || got != ScopeWrite {
		t.Errorf("CallerScope = %v, %v, want write, true", got, ok)
	}
}

func TestGroup_panicsOnInvalidScope(t *testing.T) {
	s, _ := newTestServer(t, Config{})
	defer func() {
		if recover() == nil {
			t.Error("Group with Scope(0) did not panic")
		}
	}()
	s.Group("/v1", Scope(0))
}
