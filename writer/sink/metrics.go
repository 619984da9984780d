package sink

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	dsotel "github.com/dropstream/dropstream/otel"
	"github.com/dropstream/dropstream/stream"
)

// Metric names of the batched stages (Prometheus: dots as underscores).
const (
	// MetricRowsWritten counts rows sent to ClickHouse in successful
	// inserts. Int64Counter, unit {row}, attribute table.
	MetricRowsWritten = "dropstream.writer.rows"
	// MetricFlushDuration is the wall time of one flush attempt.
	// Histogram, s; stage, outcome.
	MetricFlushDuration = "dropstream.writer.flush.duration"
	// MetricFlushErrors counts failed flush attempts. Int64Counter, unit
	// {flush}, attribute stage.
	MetricFlushErrors = "dropstream.writer.flush.errors"
	// MetricBufferedRows is the rows queued or flushing in a stage's
	// batcher. Gauge, {row}; stage.
	MetricBufferedRows = "dropstream.writer.buffered"
	// MetricSinkFailingFor is how long a stage's flushes have been failing,
	// 0 once one succeeds. Gauge, s; stage.
	MetricSinkFailingFor = "dropstream.writer.sink.failing_for"
	// MetricConsecutiveFailures counts a stage's failed flushes since its
	// last success. Gauge, {flush}; stage.
	MetricConsecutiveFailures = "dropstream.writer.flush.consecutive_failures"
)

// InstrumentationScope names the meter and tracer of the batched stages:
// the writer's, so the exported series keep their scope.
const InstrumentationScope = "github.com/dropstream/dropstream/writer"

// Attribute keys of the metrics.
var (
	keyTable   = attribute.Key("table")
	keyStage   = dsotel.StageKey
	keyOutcome = dsotel.OutcomeKey
)

// Metrics are the instruments of the batched stages.
type Metrics struct {
	rows     metric.Int64Counter
	duration metric.Float64Histogram
	errors   metric.Int64Counter
	buffered metric.Int64ObservableGauge
	failing  metric.Float64ObservableGauge
	failures metric.Int64ObservableGauge
	meter    metric.Meter
}

// NewMetrics creates the instruments on mp.
func NewMetrics(mp metric.MeterProvider) (*Metrics, error) {
	m := &Metrics{meter: mp.Meter(InstrumentationScope)}
	var errs [6]error
	m.rows, errs[0] = m.meter.Int64Counter(MetricRowsWritten,
		metric.WithDescription("Rows written to ClickHouse, by table."), metric.WithUnit("{row}"))
	m.duration, errs[1] = m.meter.Float64Histogram(MetricFlushDuration,
		metric.WithDescription("Duration of one flush of a batch to ClickHouse."), metric.WithUnit(dsotel.UnitSeconds))
	m.errors, errs[2] = m.meter.Int64Counter(MetricFlushErrors,
		metric.WithDescription("Failed flushes to ClickHouse; the batch is retried."), metric.WithUnit("{flush}"))
	m.buffered, errs[3] = m.meter.Int64ObservableGauge(MetricBufferedRows,
		metric.WithDescription("Rows waiting in the batcher to be written to ClickHouse."), metric.WithUnit("{row}"))
	m.failing, errs[4] = m.meter.Float64ObservableGauge(MetricSinkFailingFor,
		metric.WithDescription("Time since the first failed flush to ClickHouse after the last successful one; 0 while flushes succeed."),
		metric.WithUnit(dsotel.UnitSeconds))
	m.failures, errs[5] = m.meter.Int64ObservableGauge(MetricConsecutiveFailures,
		metric.WithDescription("Failed flushes to ClickHouse since the last successful one."), metric.WithUnit("{flush}"))
	if err := cmp.Or(errs[:]...); err != nil {
		return nil, fmt.Errorf("writer: analytics metrics: %w", err)
	}
	return m, nil
}

// CountRows adds n rows written to table (MetricRowsWritten); n ≤ 0 adds
// nothing.
func (m *Metrics) CountRows(table string, n int) {
	if n > 0 {
		m.rows.Add(context.Background(), int64(n), metric.WithAttributes(keyTable.String(table)))
	}
}

// Source is what the gauges observe: a Batcher.
type Source interface {
	StageName() string
	Health() Health
}

// Observe registers the gauges' callback for bs; unregister it on close.
func (m *Metrics) Observe(bs ...Source) (metric.Registration, error) {
	sets := make([]metric.ObserveOption, len(bs))
	for i, b := range bs {
		sets[i] = metric.WithAttributeSet(attribute.NewSet(keyStage.String(b.StageName())))
	}
	reg, err := m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for i, b := range bs {
			h := b.Health()
			o.ObserveInt64(m.buffered, int64(h.Buffered), sets[i])
			o.ObserveFloat64(m.failing, h.FailingFor.Seconds(), sets[i])
			o.ObserveInt64(m.failures, int64(h.Failures), sets[i])
		}
		return nil
	}, m.buffered, m.failing, m.failures)
	if err != nil {
		return nil, fmt.Errorf("writer: analytics metrics: %w", err)
	}
	return reg, nil
}

// Instruments returns a batched stage's metrics, tracer and logger from
// tel (nil fields: the globals).
func Instruments(tel stream.Telemetry) (*Metrics, trace.Tracer, *slog.Logger, error) {
	tel = tel.WithDefaults()
	met, err := NewMetrics(tel.MeterProvider)
	if err != nil {
		return nil, nil, nil, err
	}
	return met, tel.TracerProvider.Tracer(InstrumentationScope), tel.Logger, nil
}
