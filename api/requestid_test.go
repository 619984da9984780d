package api

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
)

func TestRequestID_keepsSaneReplacesOthers(t *testing.T) {
	generated := regexp.MustCompile(`^[0-9a-f]{32}$`)
	tests := []struct {
		name     string
		incoming string // "" sends no header
		wantKept bool
	}{
		{"none", "", false},
		{"sane", "req-1.2_ABC", true},
		{"sane at 128 chars", strings.Repeat("a", 128), true},
		{"too long", strings.Repeat("a", 129), false},
		{"space", "req 1", false},
		{"slash", "../etc", false},
		{"quote", `a"b`, false},
		{"non-ascii", "réq", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newTestServer(t, Config{})
			var inHandler, inContext string
			s.App().Get("/x", func(c *fiber.Ctx) error {
				inHandler, inContext = RequestID(c), RequestIDFromContext(c.UserContext())
				return c.SendStatus(http.StatusNoContent)
			})
			req, _ := http.NewRequest(http.MethodGet, "/x", nil)
			if tt.incoming != "" {
				req.Header.Set(HeaderRequestID, tt.incoming)
			}
			r := do(t, s, req)

			echoed := r.header.Get(HeaderRequestID)
			if tt.wantKept && echoed != tt.incoming {
				t.Errorf("echoed id = %q, want the incoming %q", echoed, tt.incoming)
			}
			if !tt.wantKept && !generated.MatchString(echoed) {
				t.Errorf("echoed id = %q, want a generated 32-hex id", echoed)
			}
			if inHandler != echoed || inContext != echoed {
				t.Errorf("RequestID = %q, RequestIDFromContext = %q, want both %q", inHandler, inContext, echoed)
			}
		})
	}
}

func TestRequestID_uniquePerRequest(t *testing.T) {
	s, _ := newTestServer(t, Config{})
	a := get(t, s, "/healthz").header.Get(HeaderRequestID)
	b := get(t, s, "/healthz").header.Get(HeaderRequestID)
	if a == "" || a == b {
		t.Errorf("ids %q and %q, want two distinct ids", a, b)
	}
}
