package otel

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	gotel "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Environment variables interpreted by this package itself. All other OTEL_*
// variables are read by autoexport and the SDK.
const (
	envTracesExporter  = "OTEL_TRACES_EXPORTER"
	envMetricsExporter = "OTEL_METRICS_EXPORTER"
)

// Providers holds the tracer and meter providers built by [Setup] and the
// Prometheus registry behind /metrics. Its methods are safe for concurrent
// use.
type Providers struct {
	// TracerProvider is an SDK tracer provider. It always records spans
	// (subject to OTEL_TRACES_SAMPLER, default parentbased_always_on), so
	// trace and span ids exist for logs and propagation even when nothing
	// is exported.
	TracerProvider trace.TracerProvider
	// MeterProvider is an SDK meter provider read by the Prometheus
	// exporter and, if OTEL_METRICS_EXPORTER asks for it, by an OTLP or
	// console periodic reader.
	MeterProvider metric.MeterProvider

	tp       *sdktrace.TracerProvider
	mp       sdkMeterProvider
	registry *prometheus.Registry
	handler  http.Handler

	// spanExporter and metricReader are what OTEL_TRACES_EXPORTER and
	// OTEL_METRICS_EXPORTER selected; nil when nothing is exported.
	spanExporter sdktrace.SpanExporter
	metricReader sdkmetric.Reader

	shutdownOnce sync.Once
	shutdownErr  error
}

// sdkMeterProvider is the part of *sdkmetric.MeterProvider that Providers
// needs to flush and stop it.
type sdkMeterProvider interface {
	metric.MeterProvider
	Shutdown(context.Context) error
}

// Setup builds tracer and meter providers from cfg and the standard OTEL_*
// environment variables. It does not install them globally; call
// [Providers.SetGlobal] for that, and [Providers.Shutdown] on exit.
//
// Traces: OTEL_TRACES_EXPORTER selects the exporter through autoexport
// ("otlp", "console" or "none"); unset or empty means "none", unlike
// autoexport's own default of "otlp". With "otlp",
// OTEL_EXPORTER_OTLP_PROTOCOL ("http/protobuf" default, or "grpc"),
// OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_HEADERS and the
// per-signal variants apply. Exported spans go through a batch span
// processor. OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG are honoured by
// the SDK.
//
// Metrics: a Prometheus exporter always feeds a dedicated registry (also
// holding the Go runtime and process collectors) served by
// [Providers.MetricsHandler]. OTEL_METRICS_EXPORTER="otlp" or "console" adds
// an autoexport periodic reader; unset, "none" and "prometheus" add nothing
// (the "prometheus" value does not open a second listener).
//
// Histograms named *.duration, *.latency or *.age with unit "s" or no unit
// get the buckets of [LatencyBuckets].
//
// Resource: service.name and service.version from cfg, telemetry.sdk.*,
// dropstream.embedded, then OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME,
// which win.
//
// Setup returns an error, and leaves nothing running, when cfg is invalid or
// an OTEL_* variable holds an unsupported value.
func Setup(ctx context.Context, cfg Config) (*Providers, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()

	res, err := newResource(ctx, cfg)
	if err != nil {
		return nil, err
	}

	spanExp, err := newSpanExporter(ctx)
	if err != nil {
		return nil, err
	}

	m, err := newMeterProvider(ctx, res)
	if err != nil {
		if spanExp != nil {
			err = errors.Join(err, spanExp.Shutdown(ctx))
		}
		return nil, err
	}

	tpOpts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	if spanExp != nil {
		tpOpts = append(tpOpts, sdktrace.WithBatcher(spanExp))
	}
	tp := sdktrace.NewTracerProvider(tpOpts...)

	return &Providers{
		TracerProvider: tp,
		MeterProvider:  m.provider,
		tp:             tp,
		mp:             m.provider,
		registry:       m.registry,
		handler:        m.handler,
		spanExporter:   spanExp,
		metricReader:   m.extra,
	}, nil
}

func newResource(ctx context.Context, cfg Config) (*resource.Resource, error) {
	attrs := []resource.Option{
		resource.WithSchemaURL(semconv.SchemaURL),
		resource.WithAttributes(
			semconv.ServiceName(cfg.ServiceName),
			EmbeddedKey.Bool(cfg.Embedded),
		),
	}
	if cfg.ServiceVersion != "" {
		attrs = append(attrs, resource.WithAttributes(semconv.ServiceVersion(cfg.ServiceVersion)))
	}
	// Later options win: the environment overrides cfg.
	attrs = append(attrs, resource.WithTelemetrySDK(), resource.WithFromEnv())
	res, err := resource.New(ctx, attrs...)
	if err != nil {
		return nil, fmt.Errorf("otel: resource (check OTEL_RESOURCE_ATTRIBUTES): %w", err)
	}
	return res, nil
}

// newSpanExporter returns the exporter selected by OTEL_TRACES_EXPORTER, or
// nil when nothing is to be exported.
func newSpanExporter(ctx context.Context) (sdktrace.SpanExporter, error) {
	exp, err := autoexport.NewSpanExporter(ctx,
		// Unset means "none" here, not autoexport's default "otlp".
		autoexport.WithFallbackSpanExporter(func(context.Context) (sdktrace.SpanExporter, error) {
			return nil, nil
		}))
	if err != nil {
		return nil, fmt.Errorf("otel: %s=%q: %w", envTracesExporter, os.Getenv(envTracesExporter), err)
	}
	if exp == nil || autoexport.IsNoneSpanExporter(exp) {
		return nil, nil
	}
	return exp, nil
}

// SetGlobal installs p's providers and the W3C TraceContext + Baggage
// propagator as the go.opentelemetry.io/otel globals. [Inject] and [Extract]
// use the global propagator, so call SetGlobal (or install a propagator
// yourself) before relying on them.
func (p *Providers) SetGlobal() {
	gotel.SetTracerProvider(p.TracerProvider)
	gotel.SetMeterProvider(p.MeterProvider)
	gotel.SetTextMapPropagator(NewPropagator())
}

// NewPropagator returns the propagator dropstream uses: W3C TraceContext
// followed by W3C Baggage.
func NewPropagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// MetricsHandler returns the handler serving the Prometheus text exposition
// of the registry (OTel instruments, Go runtime and process metrics). The
// same handler is returned on every call.
func (p *Providers) MetricsHandler() http.Handler { return p.handler }

// Registry returns the Prometheus registry behind [Providers.MetricsHandler].
// Collectors registered on it are served at /metrics too. It is not the
// prometheus.DefaultRegisterer.
func (p *Providers) Registry() *prometheus.Registry { return p.registry }

// Shutdown flushes pending spans and metrics to the configured exporters and
// stops both providers, waiting at most until ctx is done. It returns the
// joined errors of both. Calls after the first return the first result.
// After Shutdown, instruments and tracers of p become no-ops; the metrics
// handler keeps serving the Go and process collectors only.
func (p *Providers) Shutdown(ctx context.Context) error {
	p.shutdownOnce.Do(func() {
		var errs []error
		if err := p.tp.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("otel: shutdown tracer provider: %w", err))
		}
		if err := p.mp.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("otel: shutdown meter provider: %w", err))
		}
		p.shutdownErr = errors.Join(errs...)
	})
	return p.shutdownErr
}
