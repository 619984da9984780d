package api

import (
	"net/http"
	"time"

	"github.com/gofiber/fiber/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	dsotel "github.com/dropstream/dropstream/otel"
)

// ServerName is the server.address of the server spans, never the Host
// header a client sent.
const ServerName = "dropstream"

// RouteUnmatched is the http.route of a request no route matched.
const RouteUnmatched = "unmatched"

// MetricRequestDuration is the HTTP server histogram, in seconds, labelled
// by method ("_OTHER" for a non-standard one), route pattern and status
// only, so its series are bounded by the routes registered.
const MetricRequestDuration = "http.server.request.duration"

// instrumentationName is the tracer and meter name of the server.
const instrumentationName = "github.com/dropstream/dropstream/api"

// knownMethods are the methods telemetry keeps; others are "_OTHER".
var knownMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodConnect: true,
	http.MethodOptions: true, http.MethodTrace: true,
}

// telemetryMethod returns m if it is a standard method, else "_OTHER".
func telemetryMethod(m string) string {
	if knownMethods[m] {
		return m
	}
	return "_OTHER"
}

// telemetryRoute returns the matched route pattern, or [RouteUnmatched].
func telemetryRoute(c *fiber.Ctx) string {
	if p := matchedRoute(c); p != "" {
		return p
	}
	return RouteUnmatched
}

// spanName names a server span "<METHOD> <route pattern>", or "<METHOD>"
// when no route matched, as the HTTP semantic conventions ask.
func spanName(c *fiber.Ctx) string {
	m := telemetryMethod(c.Method())
	if p := matchedRoute(c); p != "" {
		return m + " " + p
	}
	return m
}

// tracingMiddleware starts a server span per request, continuing an
// incoming traceparent, and records [MetricRequestDuration]. The span is in
// c.UserContext() and its context in the response headers. Operational
// routes are neither traced nor measured.
func (s *Server) tracingMiddleware() fiber.Handler {
	tracer := s.cfg.TracerProvider.Tracer(instrumentationName, trace.WithSchemaURL(dsotel.SchemaURL))
	meter := s.cfg.MeterProvider.Meter(instrumentationName, metric.WithSchemaURL(dsotel.SchemaURL))
	duration, err := meter.Float64Histogram(MetricRequestDuration,
		metric.WithUnit(dsotel.UnitSeconds),
		metric.WithDescription("Duration of HTTP server requests, by method, route template and status."))
	if err != nil {
		s.log.Warn("api: HTTP server metrics disabled", "error", err)
	}
	prop := s.cfg.Propagator
	return func(c *fiber.Ctx) error {
		if isOperational(c.Path()) {
			return c.Next()
		}
		start := time.Now()
		method := telemetryMethod(c.Method())
		in := make(http.Header)
		c.Request().Header.VisitAll(func(k, v []byte) { in.Add(string(k), string(v)) })
		ctx := prop.Extract(c.UserContext(), propagation.HeaderCarrier(in))
		ctx, span := tracer.Start(ctx, method,
			trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(
				semconv.HTTPRequestMethodKey.String(method),
				semconv.ServerAddress(ServerName),
				semconv.URLScheme(c.Protocol()),
				semconv.URLPath(string(c.Request().URI().PathOriginal())),
			))
		defer span.End()
		parent := c.UserContext()
		c.SetUserContext(ctx)
		defer c.SetUserContext(parent)

		err := c.Next()
		if err != nil { // not expected: the access log renders errors
			span.RecordError(err)
			_ = s.handleError(c, err)
		}

		status := c.Response().StatusCode()
		route := telemetryRoute(c)
		span.SetName(spanName(c))
		span.SetAttributes(semconv.HTTPRoute(route), semconv.HTTPResponseStatusCode(status))
		if status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
		out := make(propagation.HeaderCarrier)
		prop.Inject(ctx, out)
		for _, k := range out.Keys() {
			c.Set(k, out.Get(k))
		}
		if duration != nil {
			duration.Record(ctx, time.Since(start).Seconds(), metric.WithAttributeSet(attribute.NewSet(
				semconv.HTTPRequestMethodKey.String(method),
				semconv.HTTPRoute(route),
				semconv.HTTPResponseStatusCode(status),
			)))
		}
		return nil
	}
}
