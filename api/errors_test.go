package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
)

func TestErrorHandler_rendersEnvelope(t *testing.T) {
	tests := []struct {
		name        string
		err         error
		wantStatus  int
		wantCode    string
		wantMessage string
		wantLogged  bool
	}{
		{"api error", Conflict("already_exists", "thing 42 exists"), http.StatusConflict, "already_exists", "thing 42 exists", false},
		{"wrapped api error", fmt.Errorf("create: %w", NotFound("thing_not_found", "no thing 42")), http.StatusNotFound, "thing_not_found", "no thing 42", false},
		{"bad request", BadRequest("invalid_limit", "limit must be positive"), http.StatusBadRequest, "invalid_limit", "limit must be positive", false},
		{"api error missing fields", &Error{Status: http.StatusTooManyRequests}, http.StatusTooManyRequests, "rate_limited", "too many requests", false},
		{"api error with bad status", &Error{Status: 200, Code: "x", Message: "y"}, http.StatusInternalServerError, "x", "y", false},
		{"fiber error", fiber.NewError(http.StatusBadRequest, "bad header"), http.StatusBadRequest, "bad_request", "bad header", false},
		{"fiber error unnamed status", fiber.NewError(http.StatusTeapot, "short and stout"), http.StatusTeapot, "im_a_teapot", "short and stout", false},
		{"plain error", errors.New("redis: connection pool exhausted secret=hunter2"), http.StatusInternalServerError, "internal", "internal error", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, logs := newTestServer(t, Config{})
			s.App().Get("/x", func(*fiber.Ctx) error { return tt.err })

			r := get(t, s, "/x")
			e := wantEnvelope(t, r, tt.wantStatus, tt.wantCode)
			if e.Message != tt.wantMessage {
				t.Errorf("message = %q, want %q", e.Message, tt.wantMessage)
			}
			if strings.Contains(string(r.body), "hunter2") {
				t.Errorf("internal error text leaked to the client: %s", r.body)
			}
			logged := strings.Contains(logs.String(), "api: request failed")
			if logged != tt.wantLogged {
				t.Errorf("error logged = %v, want %v; logs:\n%s", logged, tt.wantLogged, logs)
			}
		})
	}
}

func TestError_implementsError(t *testing.T) {
	var err error = fmt.Errorf("wrap: %w", Forbidden("forbidden", "nope"))
	var apiErr *Error
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusForbidden {
		t.Fatalf("errors.As failed on %v", err)
	}
	if got, want := apiErr.Error(), "403 forbidden: nope"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
