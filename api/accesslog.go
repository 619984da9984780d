package api

import (
	"log/slog"
	"time"

	"github.com/gofiber/fiber/v2"
	"go.opentelemetry.io/otel/trace"
)

// accessLogMiddleware logs one record per request once its response is
// decided: method, route pattern, path, status, duration, request_id and
// trace_id, at Info (Debug for the operational routes). It logs with the
// request's user context, so a trace-aware slog handler can add its own
// ids.
//
// To know the final status it renders a returned error itself through the
// ErrorHandler and returns nil, as Fiber's own logger does.
func (s *Server) accessLogMiddleware(c *fiber.Ctx) error {
	start := time.Now()
	entry := c.Route()
	err := c.Next()
	route := resolveRoute(c, entry, err)
	if err != nil {
		if herr := s.handleError(c, err); herr != nil {
			_ = c.SendStatus(fiber.StatusInternalServerError)
		}
	}
	s.logAccess(c, route, time.Since(start))
	return nil
}

// logAccess writes the access log record of the request handled by c.
func (s *Server) logAccess(c *fiber.Ctx, route string, d time.Duration) {
	// As received: not unescaped, dot segments and slashes not cleaned
	// (copied: the buffer is reused).
	path := string(c.Request().URI().PathOriginal())
	level := slog.LevelInfo
	if isOperational(path) {
		level = slog.LevelDebug
	}
	ctx := c.UserContext()
	if !s.log.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{
		slog.String("method", c.Method()),
		slog.String("route", route),
		slog.String("path", path),
		slog.Int("status", c.Response().StatusCode()),
		slog.Duration("duration", d),
		slog.String("request_id", RequestID(c)),
	}
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		attrs = append(attrs, slog.String("trace_id", sc.TraceID().String()))
	}
	s.log.LogAttrs(ctx, level, "http request", attrs...)
}
