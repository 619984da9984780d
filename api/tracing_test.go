package api

import (
	"log/slog"
	"net/http"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func TestTracing_serverSpanContinuesTraceparent(t *testing.T) {
	const (
		traceID      = "4bf92f3577b34da6a3ce929d0e0e4736"
		parentSpanID = "00f067aa0ba902b7"
		traceparent  = "00-" + traceID + "-" + parentSpanID + "-01"
	)
	tests := []struct {
		name        string
		method      string
		path        string
		traceparent string
		wantName    string
		wantRoute   string
		wantStatus  int
	}{
		{"route with parameter", http.MethodGet, "/v1/things/42", traceparent, "GET /v1/things/:id", "/v1/things/:id", http.StatusOK},
		{"error response keeps route name", http.MethodPost, "/v1/things/42", traceparent, "POST /v1/things/:id", "/v1/things/:id", http.StatusConflict},
		{"unknown route named by method only", http.MethodGet, "/v1/nope/42", traceparent, "GET", RouteUnmatched, http.StatusNotFound},
		{"wrong method named by method only", http.MethodDelete, "/v1/things/42", traceparent, "DELETE", RouteUnmatched, http.StatusMethodNotAllowed},
		{"no traceparent starts a new trace", http.MethodGet, "/v1/things/7", "", "GET /v1/things/:id", "/v1/things/:id", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })

			s, logs := newTestServer(t, Config{TracerProvider: tp})
			var handlerTraceID trace.TraceID
			v1 := s.Group("/v1", ScopeRead)
			v1.Get("/things/:id", func(c *fiber.Ctx) error {
				handlerTraceID = trace.SpanContextFromContext(c.UserContext()).TraceID()
				return c.JSON(map[string]string{"id": c.Params("id")})
			})
			v1.Post("/things/:id", func(*fiber.Ctx) error { return Conflict("exists", "thing exists") })

			req, _ := http.NewRequest(tt.method, tt.path, nil)
			req.Host = "client-chosen.example"
			if tt.traceparent != "" {
				req.Header.Set("traceparent", tt.traceparent)
			}
			r := do(t, s, req)
			if r.status != tt.wantStatus {
				t.Fatalf("status = %d, want %d (%s)", r.status, tt.wantStatus, r.body)
			}

			spans := rec.Ended()
			if len(spans) != 1 {
				t.Fatalf("got %d ended spans, want 1", len(spans))
			}
			span := spans[0]
			if span.Name() != tt.wantName {
				t.Errorf("span name = %q, want %q", span.Name(), tt.wantName)
			}
			attrs := attribute.NewSet(span.Attributes()...)
			if v, _ := attrs.Value("http.route"); v.AsString() != tt.wantRoute {
				t.Errorf("http.route = %q, want %q", v.AsString(), tt.wantRoute)
			}
			if v, _ := attrs.Value("server.address"); v.AsString() != ServerName {
				t.Errorf("server.address = %q, want the fixed %q, not the Host header", v.AsString(), ServerName)
			}
			if span.SpanKind() != trace.SpanKindServer {
				t.Errorf("span kind = %v, want server", span.SpanKind())
			}
			gotTrace := span.SpanContext().TraceID()
			if tt.traceparent != "" {
				if gotTrace.String() != traceID {
					t.Errorf("trace id = %s, want the incoming %s", gotTrace, traceID)
				}
				if got := span.Parent().SpanID().String(); got != parentSpanID || !span.Parent().IsRemote() {
					t.Errorf("parent = %s (remote %v), want remote %s", got, span.Parent().IsRemote(), parentSpanID)
				}
			} else if span.Parent().IsValid() || !gotTrace.IsValid() {
				t.Errorf("want a new root span, got parent %v trace %s", span.Parent(), gotTrace)
			}
			if tt.method == http.MethodGet && tt.wantStatus == http.StatusOK && handlerTraceID != gotTrace {
				t.Errorf("handler saw trace %s, span has %s", handlerTraceID, gotTrace)
			}

			// The access log carries the same trace id.
			var logged string
			for _, rec := range logs.records(t) {
				if rec["msg"] == "http request" {
					logged, _ = rec["trace_id"].(string)
				}
			}
			if logged != gotTrace.String() {
				t.Errorf("access log trace_id = %q, want %s", logged, gotTrace)
			}
		})
	}
}

func TestTracing_operationalRoutesNotTraced(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	s, _ := newTestServer(t, Config{TracerProvider: tp})

	for _, path := range []string{"/healthz", "/readyz"} {
		if r := get(t, s, path); r.status != http.StatusOK {
			t.Fatalf("%s = %d", path, r.status)
		}
	}
	if n := len(rec.Ended()); n != 0 {
		t.Errorf("got %d spans for probes, want 0", n)
	}
}

// BenchmarkTracing_request runs a request with a traceparent and the usual
// headers through the tracing middleware alone, 1 % of traces sampled as
// the binary's default: its CPU and allocations per request.
func BenchmarkTracing_request(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.01))))
	s, err := New(Config{Logger: slog.New(slog.DiscardHandler), TracerProvider: tp, MeterProvider: sdkmetric.NewMeterProvider()})
	if err != nil {
		b.Fatal(err)
	}
	app := fiber.New()
	app.Use(s.tracingMiddleware())
	app.Get("/v1/things/:id", func(c *fiber.Ctx) error { return c.SendString("{}") })
	handle := app.Handler()
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod(http.MethodGet)
	ctx.Request.SetRequestURI("/v1/things/42")
	for k, v := range map[string]string{"Host": "127.0.0.1:8080", "User-Agent": "Go-http-client/1.1", "Accept": "application/json",
		"Accept-Encoding": "gzip", "Traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"} {
		ctx.Request.Header.Set(k, v)
	}
	b.ReportAllocs()
	for b.Loop() {
		handle(&ctx)
		ctx.Response.Reset()
	}
}
