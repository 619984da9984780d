package api

import (
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/gofiber/fiber/v2"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// recoverMiddleware turns a panic downstream into a 500 envelope. It logs
// the panic value and stack at Error and records it on the request's span.
// Only panics in the handler's own goroutine are caught: a goroutine started
// by a handler must recover its own panics or it crashes the process.
func (s *Server) recoverMiddleware(c *fiber.Ctx) (err error) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		ctx := c.UserContext()
		stack := string(debug.Stack())
		s.log.LogAttrs(ctx, slog.LevelError, "api: handler panicked",
			slog.String("method", c.Method()),
			slog.String("path", string(c.Request().URI().Path())),
			slog.String("request_id", RequestID(c)),
			slog.String("panic", fmt.Sprint(r)),
			slog.String("stack", stack))
		span := trace.SpanFromContext(ctx)
		span.RecordError(fmt.Errorf("panic: %v", r), trace.WithStackTrace(true))
		span.SetStatus(codes.Error, "panic")
		err = errInternal // the panic value is logged and on the span, never sent
	}()
	return c.Next()
}
