package stream

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/sdk/instrumentation"

	dsotel "github.com/dropstream/dropstream/otel"
)

// latencyHistogram returns a function that records one measurement, in
// seconds, of the latency histogram name with attrs: bound once, to a
// series of the provider's Histograms when it is a *dsotel.MeterProvider,
// else through the metric API. Both export the same name, unit, buckets
// and attributes.
func latencyHistogram(mp metric.MeterProvider, name, description string, attrs attribute.Set) func(float64) {
	if p, ok := mp.(*dsotel.MeterProvider); ok {
		return p.Histograms.Series(instrumentation.Scope{Name: instrumentationScope}, name, description,
			dsotel.UnitSeconds, dsotel.LatencyBuckets(), attrs).Record
	}
	h, _ := mp.Meter(instrumentationScope).Float64Histogram(name, metric.WithDescription(description),
		metric.WithUnit(dsotel.UnitSeconds), metric.WithExplicitBucketBoundaries(dsotel.LatencyBuckets()...))
	opts := []metric.RecordOption{metric.WithAttributeSet(attrs)}
	// Measurements use a context without the message's span: with a
	// sampled span in context the SDK records an exemplar per measurement,
	// which costs more than the measurement itself at this rate.
	bg := context.Background()
	return func(v float64) { h.Record(bg, v, opts...) }
}

// Descriptions of the runtime's per-message histograms.
const (
	descHandlerDuration = "Time spent in a stage's handler per call: one message, or one batch for a batch stage."
	descMessageAge      = "Time from a message's publication to the start of its processing."
)
