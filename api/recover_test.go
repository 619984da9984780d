package api

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
)

func TestRecover_panicIs500Envelope(t *testing.T) {
	tests := []struct {
		name  string
		value any
	}{
		{"string", "db password is hunter2"},
		{"error", errors.New("hunter2 exploded")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, logs := newTestServer(t, Config{})
			s.App().Get("/boom", func(*fiber.Ctx) error { panic(tt.value) })

			r := get(t, s, "/boom")
			e := wantEnvelope(t, r, http.StatusInternalServerError, "internal")
			if e.Message != "internal error" || strings.Contains(string(r.body), "hunter2") {
				t.Errorf("panic value leaked or wrong message: %s", r.body)
			}

			var panicRec, accessRec map[string]any
			for _, rec := range logs.records(t) {
				switch rec["msg"] {
				case "api: handler panicked":
					panicRec = rec
				case "http request":
					accessRec = rec
				}
			}
			if panicRec == nil {
				t.Fatalf("panic not logged; logs:\n%s", logs)
			}
			if p, _ := panicRec["panic"].(string); !strings.Contains(p, "hunter2") {
				t.Errorf("logged panic = %q, want the panic value", p)
			}
			if st, _ := panicRec["stack"].(string); !strings.Contains(st, "recover_test.go") {
				t.Errorf("logged stack does not reach the panicking handler:\n%s", st)
			}
			if accessRec == nil || accessRec["status"] != float64(http.StatusInternalServerError) {
				t.Errorf("access log record = %v, want status 500", accessRec)
			}

			// The server keeps serving after a panic.
			if r := get(t, s, "/healthz"); r.status != http.StatusOK {
				t.Errorf("after panic: /healthz = %d", r.status)
			}
		})
	}
}
