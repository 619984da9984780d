package stream

import (
	"cmp"
	"context"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/dropstream/dropstream/internal/tick"
	dsotel "github.com/dropstream/dropstream/otel"
)

// stageStats samples a stage's accounting (lag, pending entries, oldest
// pending age, dead letters, drift) every StatsInterval and reports it, and
// the paused state, as the dropstream.stage.* and dropstream.dlq.length gauges.
type stageStats struct {
	r    *Runner
	last atomic.Pointer[snapshot] // nil before the first sample
	reg  metric.Registration
}

func newStageStats(r *Runner) (*stageStats, error) {
	s := &stageStats{r: r}
	meter := r.tel.MeterProvider.Meter(instrumentationScope)
	lag, err1 := meter.Int64ObservableGauge(dsotel.MetricStageLag,
		metric.WithDescription("Entries in the stage's streams not yet delivered to its group."), metric.WithUnit(dsotel.UnitMessages))
	pending, err2 := meter.Int64ObservableGauge(dsotel.MetricStagePending,
		metric.WithDescription("Entries delivered to the stage's group and not yet acknowledged."), metric.WithUnit(dsotel.UnitMessages))
	dlq, err3 := meter.Int64ObservableGauge(dsotel.MetricDLQLength,
		metric.WithDescription("Entries in the stage's dead-letter streams."), metric.WithUnit(dsotel.UnitMessages))
	oldest, err4 := meter.Float64ObservableGauge(dsotel.MetricStagePendingOldestAge,
		metric.WithDescription("Age of the oldest entry delivered to the stage's group and not yet acknowledged; 0 when none."), metric.WithUnit(dsotel.UnitSeconds))
	paused, err5 := meter.Int64ObservableGauge(dsotel.MetricStagePaused,
		metric.WithDescription("1 while the stage is paused, else 0."))
	drift, err6 := meter.Int64ObservableGauge(dsotel.MetricStageConservationDrift,
		metric.WithDescription("Entries published to the stage's streams less those accounted for (acknowledged, dead-lettered, dropped, skipped, delayed, requeued, pending, not yet delivered); 0 unless entries were lost or counted twice."),
		metric.WithUnit(dsotel.UnitMessages))
	if err := cmp.Or(err1, err2, err3, err4, err5, err6); err != nil {
		return nil, err
	}
	attrs := metric.WithAttributeSet(attribute.NewSet(dsotel.StageKey.String(r.stage.Name),
		dsotel.StreamKey.String(r.stage.Topic.String()), dsotel.MessagingConsumerGroupNameKey.String(r.cfg.Group)))
	reg, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		var p int64
		if s.r.gate.wait() != nil {
			p = 1
		}
		o.ObserveInt64(paused, p, attrs)
		c := s.last.Load()
		if c == nil {
			return nil
		}
		o.ObserveInt64(lag, c.Lag, attrs)
		o.ObserveInt64(pending, c.Pending, attrs)
		o.ObserveInt64(dlq, c.deadLetters, attrs)
		age := 0.0
		if c.oldestMs > 0 {
			age = max(0, time.Since(time.UnixMilli(c.oldestMs)).Seconds())
		}
		o.ObserveFloat64(oldest, age, attrs)
		if c.LagKnown {
			o.ObserveInt64(drift, c.Drift, attrs)
		}
		return nil
	}, lag, pending, dlq, oldest, paused, drift)
	if err != nil {
		return nil, err
	}
	s.reg = reg
	return s, nil
}

// Lag returns the last sampled lag, or -1 before the first sample.
func (r *Runner) Lag() int64 {
	if s := r.stats.Load(); s != nil {
		if c := s.last.Load(); c != nil {
			return c.Lag
		}
	}
	return -1
}

func (s *stageStats) run(ctx context.Context) {
	tick.Every(ctx, s.r.cfg.StatsInterval, func() { s.sample(ctx) })
}

// sample reads the group's accounting over the partitions of this copy.
func (s *stageStats) sample(ctx context.Context) {
	if c, err := conserve(ctx, s.r.rdb, s.r.stage.Topic, s.r.cfg.Group, s.r.cfg.Partitions, false); err == nil {
		s.last.Store(&c)
	}
}

func (s *stageStats) close() { _ = s.reg.Unregister() }
