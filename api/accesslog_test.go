package api

import (
	"context"
	"log/slog"
	"net/http"
	"testing"

	"github.com/gofiber/fiber/v2"
)

// ctxHandler is a slog.Handler recording the context of every record, to
// prove the access log passes the request's context.
type ctxHandler struct {
	slog.Handler
	requestIDs *[]string
}

func (h ctxHandler) Handle(ctx context.Context, r slog.Record) error {
	*h.requestIDs = append(*h.requestIDs, RequestIDFromContext(ctx))
	return h.Handler.Handle(ctx, r)
}

func TestAccessLog_fields(t *testing.T) {
	tests := []struct {
		name       string
		path       string
		wantLevel  string
		wantRoute  string
		wantStatus int
	}{
		{"feature route at info", "/v1/things/42", "INFO", "/v1/things/:id", http.StatusOK},
		{"unknown route", "/v1/nope", "INFO", "", http.StatusNotFound},
		{"probe at debug", "/healthz", "DEBUG", "/healthz", http.StatusOK},
		{"escaped path logged as received", "/v1/things/%34%32%2F", "INFO", "/v1/things/:id", http.StatusOK},
		{"dot segments and slashes logged as received", "/v1/x/..//things/42", "INFO", "", http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs := &syncBuffer{}
			var ctxIDs []string
			logger := slog.New(ctxHandler{
				Handler:    slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}),
				requestIDs: &ctxIDs,
			})
			s, _ := newTestServer(t, Config{Logger: logger, APIKeys: "k:read"})
			s.Group("/v1", ScopeRead).Get("/things/:id", func(c *fiber.Ctx) error { return c.SendString("x") })

			req, _ := http.NewRequest(http.MethodGet, tt.path, nil)
			req.Header.Set(HeaderRequestID, "req-42")
			req.Header.Set(HeaderAPIKey, "k")
			do(t, s, req)

			recs := logs.records(t)
			if len(recs) != 1 {
				t.Fatalf("got %d log records, want 1:\n%s", len(recs), logs)
			}
			rec := recs[0]
			want := map[string]any{
				"level": tt.wantLevel, "msg": "http request", "method": "GET",
				"route": tt.wantRoute, "path": tt.path, "status": float64(tt.wantStatus), "request_id": "req-42",
			}
			for k, v := range want {
				if rec[k] != v {
					t.Errorf("%s = %v, want %v", k, rec[k], v)
				}
			}
			if _, ok := rec["duration"]; !ok {
				t.Error("no duration")
			}
			if len(ctxIDs) != 1 || ctxIDs[0] != "req-42" {
				t.Errorf("log context carried request ids %v, want [req-42]", ctxIDs)
			}
		})
	}
}
