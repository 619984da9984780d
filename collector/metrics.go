package collector

import (
	"cmp"
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	dsotel "github.com/dropstream/dropstream/otel"
)

// Metric names of the collector. Attributes come from bounded sets
// (provider, outcome), never a source id; a source's figures are its
// health in the API.
const (
	// MetricPolls counts polls. Int64Counter, unit {poll}, attributes
	// provider, outcome.
	MetricPolls = "dropstream.collector.polls"
	// MetricFetchDuration is one request's wall time, body included.
	// Float64Histogram, unit s, attributes provider, outcome.
	MetricFetchDuration = "dropstream.collector.fetch.duration"
	// MetricConsecutiveFailures is, per provider, the most failed runs in a
	// row of any of its sources. Int64ObservableGauge, unit {run}.
	MetricConsecutiveFailures = "dropstream.collector.consecutive_failures"
)

// attrProvider is the collector's metric attribute key: a source's
// provider, one of the registered ones.
var attrProvider = attribute.Key("provider")

type metrics struct {
	polls    metric.Int64Counter
	duration metric.Float64Histogram
	reg      metric.Registration
}

// newMetrics creates the instruments; failures reports every source's
// consecutive failures when the gauge is observed.
func newMetrics(mp metric.MeterProvider, failures func(yield func(sourceID, provider string, n int))) (*metrics, error) {
	meter := mp.Meter(dsotel.ScopeName, metric.WithSchemaURL(dsotel.SchemaURL))
	polls, err1 := meter.Int64Counter(MetricPolls,
		metric.WithDescription("Polls of a source's scopes, by outcome."), metric.WithUnit("{poll}"))
	duration, err2 := meter.Float64Histogram(MetricFetchDuration,
		metric.WithDescription("Time to fetch one provider response, body included."), metric.WithUnit(dsotel.UnitSeconds),
		metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
	gauge, err3 := meter.Int64ObservableGauge(MetricConsecutiveFailures,
		metric.WithDescription("Failed runs of a source since its last successful one."), metric.WithUnit("{run}"))
	m := &metrics{polls: polls, duration: duration}
	if err := cmp.Or(err1, err2, err3); err != nil {
		return nil, err
	}
	reg, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		worst := map[string]int{}
		failures(func(_, provider string, n int) { worst[provider] = max(worst[provider], n) })
		for provider, n := range worst {
			o.ObserveInt64(gauge, int64(n), metric.WithAttributes(attrProvider.String(provider)))
		}
		return nil
	}, gauge)
	if err != nil {
		return nil, err
	}
	m.reg = reg
	return m, nil
}

// recordPoll counts a poll and records its fetch latency.
func (m *metrics) recordPoll(ctx context.Context, src Source, outcome string, latency time.Duration) {
	attrs := metric.WithAttributes(attrProvider.String(src.Provider), dsotel.OutcomeKey.String(outcome))
	m.polls.Add(ctx, 1, attrs)
	m.duration.Record(ctx, latency.Seconds(), attrs)
}

func (m *metrics) close() error {
	if m.reg == nil {
		return nil
	}
	return m.reg.Unregister()
}
