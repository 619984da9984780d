package writer

import (
	"context"
	"fmt"

	gotel "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	dsotel "github.com/dropstream/dropstream/otel"
)

// Metric (instrument) names of the analytics stages. Prometheus exposes them
// with dots as underscores, plus _total for counters and _seconds for the
// histogram.
const (
	// MetricRowsWritten counts rows sent to ClickHouse in successful
	// inserts. Int64Counter, unit {row}, attribute table.
	MetricRowsWritten = "dropstream.writer.rows"
	// MetricFlushDuration is the wall time of one flush attempt (every
	// table of the batch). Float64Histogram, unit s, attributes stage,
	// outcome (ok or error).
	MetricFlushDuration = "dropstream.writer.flush.duration"
	// MetricFlushErrors counts failed flush attempts. Int64Counter, unit
	// {flush}, attribute stage.
	MetricFlushErrors = "dropstream.writer.flush.errors"
	// MetricBufferedRows is the number of rows waiting in a stage's batcher
	// (including a batch being flushed). Int64ObservableGauge, unit {row},
	// attribute stage.
	MetricBufferedRows = "dropstream.writer.buffered"
	// MetricSinkFailingFor is how long a stage's flushes have been failing:
	// the time since the first failed flush after the last successful one,
	// 0 once a flush succeeds. It rises for the whole of a ClickHouse
	// outage while the stage has rows to write, whatever the buffer holds
	// at the scrape. Float64ObservableGauge, unit s, attribute stage.
	MetricSinkFailingFor = "dropstream.writer.sink.failing_for"
	// MetricConsecutiveFailures is the number of failed flushes of a stage
	// since its last successful one. Int64ObservableGauge, unit {flush},
	// attribute stage.
	MetricConsecutiveFailures = "dropstream.writer.flush.consecutive_failures"
	// MetricUnmatchedCloses counts raw closes whose opening the diff did
	// not know (entities opened under an earlier version), so no session
	// row was written. Int64Counter, unit
	// {transition}.
	MetricUnmatchedCloses = "dropstream.writer.sessions.unmatched"
)

// Attribute keys of the writer's metrics.
var (
	keyTable   = attribute.Key("table")
	keyStage   = dsotel.StageKey
	keyOutcome = dsotel.OutcomeKey
)

func meter(mp metric.MeterProvider) metric.Meter {
	if mp == nil {
		mp = gotel.GetMeterProvider()
	}
	return mp.Meter(instrumentationScope)
}

// analyticsMetrics are the instruments of the analytics stages.
type analyticsMetrics struct {
	rows      metric.Int64Counter
	duration  metric.Float64Histogram
	errors    metric.Int64Counter
	unmatched metric.Int64Counter
	buffered  metric.Int64ObservableGauge
	failing   metric.Float64ObservableGauge
	failures  metric.Int64ObservableGauge
	meter     metric.Meter
}

func newAnalyticsMetrics(mp metric.MeterProvider) (*analyticsMetrics, error) {
	m := &analyticsMetrics{meter: meter(mp)}
	var errs [7]error
	m.rows, errs[0] = m.meter.Int64Counter(MetricRowsWritten,
		metric.WithDescription("Rows written to ClickHouse, by table."), metric.WithUnit("{row}"))
	m.duration, errs[1] = m.meter.Float64Histogram(MetricFlushDuration,
		metric.WithDescription("Duration of one flush of a batch to ClickHouse."), metric.WithUnit(dsotel.UnitSeconds))
	m.errors, errs[2] = m.meter.Int64Counter(MetricFlushErrors,
		metric.WithDescription("Failed flushes to ClickHouse; the batch is retried."), metric.WithUnit("{flush}"))
	m.unmatched, errs[3] = m.meter.Int64Counter(MetricUnmatchedCloses,
		metric.WithDescription("Raw closes with no known open: no session row."), metric.WithUnit("{transition}"))
	m.buffered, errs[4] = m.meter.Int64ObservableGauge(MetricBufferedRows,
		metric.WithDescription("Rows waiting in the batcher to be written to ClickHouse."), metric.WithUnit("{row}"))
	m.failing, errs[5] = m.meter.Float64ObservableGauge(MetricSinkFailingFor,
		metric.WithDescription("Time since the first failed flush to ClickHouse after the last successful one; 0 while flushes succeed."),
		metric.WithUnit(dsotel.UnitSeconds))
	m.failures, errs[6] = m.meter.Int64ObservableGauge(MetricConsecutiveFailures,
		metric.WithDescription("Failed flushes to ClickHouse since the last successful one."), metric.WithUnit("{flush}"))
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("writer: analytics metrics: %w", err)
		}
	}
	return m, nil
}

// observeBuffered registers the callback of the batchers' gauges (buffered
// rows, failing for, consecutive failures); the returned registration must
// be unregistered on close.
func (m *analyticsMetrics) observeBuffered(bs ...interface {
	stageName() string
	health() health
}) (metric.Registration, error) {
	sets := make([]metric.ObserveOption, len(bs))
	for i, b := range bs {
		sets[i] = metric.WithAttributeSet(attribute.NewSet(keyStage.String(b.stageName())))
	}
	reg, err := m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for i, b := range bs {
			h := b.health()
			o.ObserveInt64(m.buffered, int64(h.buffered), sets[i])
			o.ObserveFloat64(m.failing, h.failingFor.Seconds(), sets[i])
			o.ObserveInt64(m.failures, int64(h.failures), sets[i])
		}
		return nil
	}, m.buffered, m.failing, m.failures)
	if err != nil {
		return nil, fmt.Errorf("writer: analytics metrics: %w", err)
	}
	return reg, nil
}
