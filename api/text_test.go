package api

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
)

func TestCheckText_refusesControlAndBidiCharacters(t *testing.T) {
	tests := []struct {
		value string
		bad   bool
	}{
		{"", false},
		{"Le Petit Café", false},
		{"مطعم", false},
		{"👨‍👩‍👧 family", false}, // zero-width joiners
		{"a\nb", true},
		{"tab\there", true},
		{"nul\x00", true},
		{"del\x7f", true},
		{"c1\u0085", true},
		{"evil\u202Etxt.exe", true},
		{"\u202Aleft", true},
		{"\u2066isolate\u2069", true},
		{"mark\u200E", true},
		{"mark\u200F", true},
		{"arabic mark\u061C", true},
		{"zero\u200Bwidth", true},
		{"bom\uFEFF", true},
		{"bad utf8 \xff", true},
	}
	for _, tt := range tests {
		err := CheckText(Text("name", "ok"), Text("venue", tt.value))
		if !tt.bad {
			if err != nil {
				t.Errorf("CheckText(%q) = %v, want nil", tt.value, err)
			}
			continue
		}
		var e *Error
		if !errors.As(err, &e) || e.Status != http.StatusUnprocessableEntity || e.Code != CodeInvalidText ||
			!strings.HasPrefix(e.Message, "venue ") {
			t.Errorf("CheckText(%q) = %v, want a 422 %s naming venue", tt.value, err, CodeInvalidText)
		}
	}
}

func TestDateQuery_acceptsOnlyCalendarDates(t *testing.T) {
	tests := []struct {
		query string
		want  string
		bad   bool
	}{
		{"", "", false},
		{"date=2026-11-25", "2026-11-25", false},
		{"date=2028-02-29", "2028-02-29", false},
		{"date=2026-13-45", "", true},
		{"date=2026-02-30", "", true},
		{"date=26-1-1", "", true},
		{"date=2026-11-25T00:00:00Z", "", true},
		{"date=yesterday", "", true},
	}
	for _, tt := range tests {
		app := fiber.New()
		var got string
		var gotErr error
		app.Get("/", func(c *fiber.Ctx) error {
			got, gotErr = DateQuery(c, "date")
			return nil
		})
		if _, err := app.Test(httptest.NewRequest(http.MethodGet, "/?"+tt.query, nil)); err != nil {
			t.Fatal(err)
		}
		var e *Error
		if tt.bad != (errors.As(gotErr, &e) && e.Status == http.StatusBadRequest && e.Code == "invalid_date") {
			t.Errorf("DateQuery(%q) error = %v, want a 400 invalid_date: %v", tt.query, gotErr, tt.bad)
		}
		if got != tt.want {
			t.Errorf("DateQuery(%q) = %q, want %q", tt.query, got, tt.want)
		}
	}
}

func TestErrorHandler_messagesFitForClients(t *testing.T) {
	tests := []struct {
		name, message, want string
	}{
		{"joined errors on one line", "invalid: name: too long\ndestinations: want 1-8", "invalid: name: too long; destinations: want 1-8"},
		{"repeated prefix said once", "invalid watcher: invalid watcher: venue: bad", "invalid watcher: venue: bad"},
		{"Go struct field", "json: cannot unmarshal string into Go struct field Watcher.venue of type int",
			`field "venue" must be a JSON number, not string`},
		{"Go value", "decode: json: cannot unmarshal array into Go value of type watch.Watcher",
			"decode: the value must be a JSON value, not array"},
		{"json prefix", "json: unknown field \"x\"", `unknown field "x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newTestServer(t, Config{})
			s.App().Get("/x", func(*fiber.Ctx) error { return UnprocessableEntity("invalid_thing", tt.message) })
			got := wantEnvelope(t, get(t, s, "/x"), http.StatusUnprocessableEntity, "invalid_thing")
			if got.Message != tt.want {
				t.Errorf("message = %q, want %q", got.Message, tt.want)
			}
		})
	}
}

func TestNotConfigured_is503WithItsCode(t *testing.T) {
	s, _ := newTestServer(t, Config{})
	s.Handle(Operation{Method: http.MethodGet, Path: "/v1/stats/things", Scope: ScopeRead,
		Handler: func(*fiber.Ctx) error { return NotConfigured("ClickHouse", "DROPSTREAM_CLICKHOUSE_DSN") }})
	got := wantEnvelope(t, get(t, s, "/v1/stats/things"), http.StatusServiceUnavailable, CodeNotConfigured)
	if !strings.Contains(got.Message, "DROPSTREAM_CLICKHOUSE_DSN") {
		t.Errorf("message %q does not say what to set", got.Message)
	}
}

func TestHandle_getRoutesAnswerHead(t *testing.T) {
	s, _ := newTestServer(t, Config{})
	s.Handle(Operation{Method: http.MethodGet, Path: "/v1/things/:id", Scope: ScopeRead,
		Handler: func(c *fiber.Ctx) error { return c.JSON(map[string]string{"id": c.Params("id")}) }})
	s.Handle(Operation{Method: http.MethodGet, Path: "/v1/public", Public: true,
		Handler: func(c *fiber.Ctx) error { return c.SendString("hello") }})
	for _, path := range []string{"/v1/things/42", "/v1/public", PathHealthz, PathOpenAPI} {
		r := do(t, s, httptest.NewRequest(http.MethodHead, path, nil))
		if r.status != http.StatusOK || len(r.body) != 0 {
			t.Errorf("HEAD %s = %d with %d bytes, want 200 without a body", path, r.status, len(r.body))
		}
	}
}
