package api

import (
	"cmp"
	"net/http"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
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
	var sets sync.Map // durationKey → attribute.Set, bounded by the routes
	return func(c *fiber.Ctx) error {
		if isOperational(c.Path()) {
			return c.Next()
		}
		start := time.Now()
		method := telemetryMethod(c.Method())
		ctx := prop.Extract(c.UserContext(), headerCarrier{c})
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
		matched := matchedRoute(c)
		route := cmp.Or(matched, RouteUnmatched)
		if span.IsRecording() {
			// The span is named "<METHOD> <route pattern>", or "<METHOD>"
			// when no route matched, as the HTTP semantic conventions ask.
			if matched != "" {
				span.SetName(method + " " + matched)
			}
			span.SetAttributes(semconv.HTTPRoute(route), semconv.HTTPResponseStatusCode(status))
			if status >= 500 {
				span.SetStatus(codes.Error, http.StatusText(status))
			}
		}
		prop.Inject(ctx, headerCarrier{c})
		if duration != nil {
			key := durationKey{method, route, status}
			set, ok := sets.Load(key)
			if !ok {
				set, _ = sets.LoadOrStore(key, attribute.NewSet(semconv.HTTPRequestMethodKey.String(method),
					semconv.HTTPRoute(route), semconv.HTTPResponseStatusCode(status)))
			}
			duration.Record(ctx, time.Since(start).Seconds(), metric.WithAttributeSet(set.(attribute.Set)))
		}
		return nil
	}
}

// durationKey is what labels a request's duration.
type durationKey struct {
	method, route string
	status        int
}

// headerCarrier lets the propagator read the request's headers and set the
// response's, without copying them into an http.Header.
type headerCarrier struct{ c *fiber.Ctx }

func (h headerCarrier) Get(key string) string { return string(h.c.Request().Header.Peek(key)) }
func (h headerCarrier) Set(key, value string) { h.c.Set(key, value) }

// Keys lists the request's header names.
func (h headerCarrier) Keys() []string {
	var keys []string
	h.c.Request().Header.VisitAll(func(k, _ []byte) { keys = append(keys, string(k)) })
	return keys
}
