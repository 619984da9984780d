package otel

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/otlptranslator"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	promexporter "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
)

// latencyBuckets are bucket boundaries in seconds, 50µs to 10s, roughly
// 1-2.5-5 per decade: fine enough for sub-millisecond stream hops and still
// covering slow handlers.
var latencyBuckets = []float64{
	0.00005, 0.0001, 0.00025, 0.0005,
	0.001, 0.0025, 0.005,
	0.01, 0.025, 0.05,
	0.1, 0.25, 0.5,
	1, 2.5, 5, 10,
}

// LatencyBuckets returns a copy of the bucket boundaries, in seconds, that
// [Setup] gives latency histograms.
func LatencyBuckets() []float64 {
	return slices.Clone(latencyBuckets)
}

// latencySuffixes are the instrument name endings that select LatencyBuckets.
var latencySuffixes = []string{".duration", ".latency", ".age"}

// latencyView gives LatencyBuckets to histograms named with a
// latencySuffixes suffix whose unit is seconds or unset.
func latencyView(inst sdkmetric.Instrument) (sdkmetric.Stream, bool) {
	name := strings.ToLower(inst.Name)
	if inst.Kind != sdkmetric.InstrumentKindHistogram || (inst.Unit != "" && inst.Unit != UnitSeconds) ||
		!slices.ContainsFunc(latencySuffixes, func(suffix string) bool { return strings.HasSuffix(name, suffix) }) {
		return sdkmetric.Stream{}, false
	}
	return sdkmetric.Stream{
		Name:        inst.Name,
		Description: inst.Description,
		Unit:        inst.Unit,
		Aggregation: sdkmetric.AggregationExplicitBucketHistogram{
			Boundaries: LatencyBuckets(),
		},
	}, true
}

// MeterProvider is the SDK meter provider [Setup] builds, with the
// Histograms each of its readers reads as a producer. Code that records a
// histogram for every message binds a series of Histograms when its
// provider is one of these, and uses the metric API otherwise.
type MeterProvider struct {
	*sdkmetric.MeterProvider
	Histograms *Histograms
}

// meterSetup is what newMeterProvider builds.
type meterSetup struct {
	provider *MeterProvider
	registry *prometheus.Registry
	handler  http.Handler
	extra    sdkmetric.Reader // from OTEL_METRICS_EXPORTER; nil if none
}

// newMeterProvider builds the meter provider with the Prometheus reader on a
// new registry, plus the reader selected by OTEL_METRICS_EXPORTER.
func newMeterProvider(ctx context.Context, res *resource.Resource) (meterSetup, error) {
	reg := prometheus.NewRegistry()
	for _, c := range []prometheus.Collector{
		// The Go collector's defaults plus the live heap after the last
		// GC (go_gc_heap_live_bytes), the figure a leak shows in first.
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
			collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$`)})),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := reg.Register(c); err != nil {
			return meterSetup{}, fmt.Errorf("otel: register runtime collector: %w", err)
		}
	}

	hist := NewHistograms()
	promReader, err := promexporter.New(
		promexporter.WithRegisterer(reg),
		promexporter.WithProducer(hist),
		// Explicit, so a future change of the exporter's default cannot
		// rename every series: dots become underscores, units and _total
		// suffixes are added.
		promexporter.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes),
	)
	if err != nil {
		return meterSetup{}, fmt.Errorf("otel: prometheus exporter: %w", err)
	}

	extra, err := newMetricReader(ctx, hist)
	if err != nil {
		return meterSetup{}, errors.Join(err, promReader.Shutdown(ctx))
	}

	opts := []sdkmetric.Option{
		sdkmetric.WithResource(res),
		sdkmetric.WithReader(promReader),
		sdkmetric.WithView(latencyView),
	}
	if extra != nil {
		opts = append(opts, sdkmetric.WithReader(extra))
	}
	mp := &MeterProvider{MeterProvider: sdkmetric.NewMeterProvider(opts...), Histograms: hist}

	handler := promhttp.InstrumentMetricHandler(reg,
		promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	return meterSetup{provider: mp, registry: reg, handler: handler, extra: extra}, nil
}

// readerMu serializes newMetricReader: autoexport takes its fallback
// producer from a package variable.
var readerMu sync.Mutex

// newMetricReader returns the autoexport reader selected by
// OTEL_METRICS_EXPORTER, or nil when only Prometheus is wanted. The reader
// also reads hist, unless OTEL_METRICS_PRODUCERS names its producers.
func newMetricReader(ctx context.Context, hist *Histograms) (sdkmetric.Reader, error) {
	v := os.Getenv(envMetricsExporter)
	switch v {
	case "", "none", "prometheus":
		return nil, nil
	}
	readerMu.Lock()
	defer readerMu.Unlock()
	autoexport.WithFallbackMetricProducer(func(context.Context) (sdkmetric.Producer, error) { return hist, nil })
	r, err := autoexport.NewMetricReader(ctx)
	if err != nil {
		return nil, fmt.Errorf("otel: %s=%q: %w", envMetricsExporter, v, err)
	}
	return r, nil
}
