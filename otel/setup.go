package otel

import (
	"cmp"
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

// Providers holds the providers built by [Setup] and the Prometheus
// registry behind /metrics. Its methods are safe for concurrent use.
type Providers struct {
	// TracerProvider records spans (subject to OTEL_TRACES_SAMPLER) even
	// when nothing is exported, so logs get trace ids.
	TracerProvider trace.TracerProvider
	// MeterProvider is a *[MeterProvider], read by the Prometheus
	// exporter and any reader OTEL_METRICS_EXPORTER asks for.
	MeterProvider metric.MeterProvider

	tp *TracerProvider
	meterSetup
	// spanExporter is what OTEL_TRACES_EXPORTER selected; nil when nothing
	// is exported.
	spanExporter sdktrace.SpanExporter

	shutdownOnce sync.Once
	shutdownErr  error
}

// Setup builds tracer and meter providers from cfg and the standard OTEL_*
// environment variables. It does not install them globally; call
// [Providers.SetGlobal] for that, and [Providers.Shutdown] on exit.
//
// Traces: OTEL_TRACES_EXPORTER ("otlp", "console" or "none", the default)
// picks the exporter through autoexport, with the usual OTEL_EXPORTER_OTLP_*
// variables. Metrics: a Prometheus exporter feeds [Providers.MetricsHandler];
// OTEL_METRICS_EXPORTER "otlp" or "console" adds a periodic reader.
// Histograms named *.duration, *.latency or *.age get [LatencyBuckets].
// OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME override cfg's resource.
//
// On an invalid cfg or OTEL_* value Setup returns an error and leaves
// nothing running.
func Setup(ctx context.Context, cfg Config) (*Providers, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.ServiceName = cmp.Or(cfg.ServiceName, DefaultServiceName)

	res, err := newResource(ctx, cfg)
	if err != nil {
		return nil, err
	}

	sampler, err := samplerFromEnv()
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

	tp := NewTracerProvider(sampler, res, spanExp)

	return &Providers{TracerProvider: tp, MeterProvider: m.provider, tp: tp, meterSetup: m, spanExporter: spanExp}, nil
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
// propagator as the go.opentelemetry.io/otel globals.
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

// MetricsHandler returns the handler serving the registry in Prometheus
// text format.
func (p *Providers) MetricsHandler() http.Handler { return p.handler }

// Registry returns the Prometheus registry behind [Providers.MetricsHandler]
// (not prometheus.DefaultRegisterer).
func (p *Providers) Registry() *prometheus.Registry { return p.registry }

// Shutdown flushes pending spans and metrics and stops both providers,
// waiting at most until ctx is done. Later calls return the first result.
func (p *Providers) Shutdown(ctx context.Context) error {
	p.shutdownOnce.Do(func() {
		var errs []error
		if err := p.tp.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("otel: shutdown tracer provider: %w", err))
		}
		if err := p.provider.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("otel: shutdown meter provider: %w", err))
		}
		p.shutdownErr = errors.Join(errs...)
	})
	return p.shutdownErr
}
