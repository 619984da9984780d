package api

import (
	"github.com/gofiber/contrib/otelfiber/v2"
	"github.com/gofiber/fiber/v2"
)

// spanName names a server span "<METHOD> <route pattern>", or "<METHOD>"
// alone when no route matched, as the HTTP semantic conventions ask (raw
// paths would explode the span-name cardinality). The pattern is the one the
// access log middleware, which runs inside the span, resolved.
func spanName(c *fiber.Ctx) string {
	if p := matchedRoute(c); p != "" {
		return c.Method() + " " + p
	}
	return c.Method()
}

// tracingMiddleware starts an OpenTelemetry server span per request (and
// records the HTTP server metrics) with the configured providers. The span
// continues the trace of an incoming traceparent header and is in
// c.UserContext() for the handlers. Operational routes are not traced.
//
// otelfiber hands any error returned downstream to the ErrorHandler itself;
// the access log below it already does so, so no error reaches it.
func (s *Server) tracingMiddleware() fiber.Handler {
	return otelfiber.Middleware(
		otelfiber.WithTracerProvider(s.cfg.TracerProvider),
		otelfiber.WithMeterProvider(s.cfg.MeterProvider),
		otelfiber.WithPropagators(s.cfg.Propagator),
		otelfiber.WithSpanNameFormatter(spanName),
		otelfiber.WithNext(func(c *fiber.Ctx) bool { return isOperational(c.Path()) }),
	)
}
