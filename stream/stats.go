package stream

import (
	"cmp"
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/dropstream/dropstream/internal/tick"
	dsotel "github.com/dropstream/dropstream/otel"
)

// stageStats samples a stage's lag, pending entries, oldest pending age,
// dead-letter length, paused state and accounting drift every StatsInterval
// and reports them as the dropstream.stage.* and dropstream.dlq.length gauges.
type stageStats struct {
	r       *Runner
	lag     atomic.Int64
	pending atomic.Int64
	// oldestMs is the publish time (Unix ms) of the oldest pending entry,
	// 0 when nothing is pending.
	oldestMs atomic.Int64
	dlq      atomic.Int64
	// drift is the group's conservation drift; driftKnown is false before
	// the first sample and while the lag cannot be counted.
	drift      atomic.Int64
	driftKnown atomic.Bool
	reg        metric.Registration
}

func newStageStats(r *Runner) (*stageStats, error) {
	s := &stageStats{r: r}
	s.lag.Store(-1)
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
		if v := s.lag.Load(); v >= 0 {
			o.ObserveInt64(lag, v, attrs)
		}
		o.ObserveInt64(pending, s.pending.Load(), attrs)
		o.ObserveInt64(dlq, s.dlq.Load(), attrs)
		age := 0.0
		if ms := s.oldestMs.Load(); ms > 0 {
			age = max(0, time.Since(time.UnixMilli(ms)).Seconds())
		}
		o.ObserveFloat64(oldest, age, attrs)
		var p int64
		if s.r.gate.isPaused() {
			p = 1
		}
		o.ObserveInt64(paused, p, attrs)
		if s.driftKnown.Load() {
			o.ObserveInt64(drift, s.drift.Load(), attrs)
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
	s := r.stats.Load()
	if s == nil {
		return -1
	}
	return s.lag.Load()
}

func (s *stageStats) run(ctx context.Context) {
	tick.Every(ctx, s.r.cfg.StatsInterval, func() { s.sample(ctx) })
}

// sample reads XINFO GROUPS and XLEN of every partition of this copy.
func (s *stageStats) sample(ctx context.Context) {
	var lag, pending, dlq, oldestMs int64
	lagKnown := true
	for _, p := range s.r.cfg.Partitions {
		groups, err := s.r.rdb.XInfoGroups(ctx, s.r.stage.Topic.Stream(p)).Result()
		if err != nil {
			return
		}
		for _, g := range groups {
			if g.Name != s.r.cfg.Group {
				continue
			}
			pending += g.Pending
			if g.Pending > 0 {
				if ms := s.oldestPending(ctx, s.r.stage.Topic.Stream(p)); ms > 0 && (oldestMs == 0 || ms < oldestMs) {
					oldestMs = ms
				}
			}
			n := g.Lag
			if n < 0 || (g.EntriesRead == 0 && g.LastDeliveredID != "0-0") {
				// Redis cannot tell after deletions, and miniredis does not
				// track entries-read: count what follows the group's position.
				n = s.countAfter(ctx, s.r.stage.Topic.Stream(p), g.LastDeliveredID)
			}
			if n < 0 {
				lagKnown = false
			}
			lag += n
		}
		n, err := s.r.rdb.XLen(ctx, s.r.stage.Topic.DeadLetterStream(p)).Result()
		if err != nil {
			return
		}
		dlq += n
	}
	if !lagKnown {
		lag = -1
	}
	if c, err := conserve(ctx, s.r.rdb, s.r.stage.Topic, s.r.cfg.Group, s.r.cfg.Partitions, false); err == nil {
		s.drift.Store(c.Drift)
		s.driftKnown.Store(c.LagKnown)
	}
	s.lag.Store(lag)
	s.pending.Store(pending)
	s.dlq.Store(dlq)
	s.oldestMs.Store(oldestMs)
}

// oldestPending returns the publish time (Unix ms, from the entry id) of
// the group's oldest pending entry in stream, or 0 if unknown.
func (s *stageStats) oldestPending(ctx context.Context, stream string) int64 {
	sum, err := s.r.rdb.XPending(ctx, stream, s.r.cfg.Group).Result()
	if err != nil || sum.Count == 0 {
		return 0
	}
	ms, _, ok := strings.Cut(sum.Lower, "-")
	if !ok {
		return 0
	}
	v, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return 0
	}
	return v
}

// lagCountCap bounds the fallback count of undelivered entries.
const lagCountCap = 10000

// countAfter counts up to lagCountCap entries after id, or -1 on error.
func (s *stageStats) countAfter(ctx context.Context, stream, id string) int64 {
	xs, err := s.r.rdb.XRangeN(ctx, stream, "("+id, "+", lagCountCap).Result()
	if err != nil {
		return -1
	}
	return int64(len(xs))
}

func (s *stageStats) close() { _ = s.reg.Unregister() }
