package stream

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/sdk/instrumentation"

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

// run samples the group's accounting over the copy's partitions every
// StatsInterval until ctx ends.
func (s *stageStats) run(ctx context.Context) {
	tick.Every(ctx, s.r.cfg.StatsInterval, func() {
		if c, err := conserve(ctx, s.r.rdb, s.r.stage.Topic, s.r.cfg.Group, s.r.cfg.Partitions, false); err == nil {
			s.last.Store(&c)
		}
	})
}

func (s *stageStats) close() { _ = s.reg.Unregister() }

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

// outcomeCounter reports dropstream.stage.messages: messages a stage
// handled, by outcome. It is added to once per batch, not per message.
type outcomeCounter struct {
	counter metric.Int64Counter
	opts    [5][]metric.AddOption
}

// outcomeIndex orders the outcomes in outcomeCounts.
var outcomeIndex = map[Outcome]int{OutcomeAcked: 0, OutcomeDropped: 1, OutcomeDeadLettered: 2, OutcomeFailed: 3, OutcomeDelayed: 4}

// outcomeCounts tallies one batch.
type outcomeCounts [5]int64

func (c *outcomeCounts) count(o Outcome) { c[outcomeIndex[o]]++ }

func newOutcomeCounter(mp metric.MeterProvider, info StageInfo) *outcomeCounter {
	counter, _ := mp.Meter(instrumentationScope).Int64Counter(dsotel.MetricStageMessages,
		metric.WithDescription("Messages handled by a stage, by outcome."), metric.WithUnit(dsotel.UnitMessages))
	c := &outcomeCounter{counter: counter}
	for o, i := range outcomeIndex {
		c.opts[i] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(
			dsotel.StageKey.String(info.Stage), dsotel.StreamKey.String(info.Topic.String()), dsotel.OutcomeKey.String(string(o))))}
	}
	return c
}

// add reports a batch's tally.
func (c *outcomeCounter) add(counts *outcomeCounts) {
	for i, n := range counts {
		if n > 0 {
			c.counter.Add(context.Background(), n, c.opts[i]...)
		}
	}
}

// Drained reports whether group has read and acknowledged every entry of
// every partition of topic. An empty partition counts as drained; an
// error, or a partition with entries and no such group, as not.
func Drained(ctx context.Context, rdb redis.UniversalClient, topic Topic, group string) bool {
	for p := range topic.Partitions {
		key := topic.Stream(p)
		last, err := rdb.XRevRangeN(ctx, key, "+", "-", 1).Result()
		if err != nil {
			return false
		}
		if len(last) == 0 {
			continue
		}
		groups, err := rdb.XInfoGroups(ctx, key).Result()
		if err != nil {
			return false
		}
		if !slices.ContainsFunc(groups, func(g redis.XInfoGroup) bool {
			return g.Name == group && g.Pending == 0 && g.LastDeliveredID == last[0].ID
		}) {
			return false
		}
	}
	return true
}

// Unhandled is how many entries of topic the groups have not acknowledged
// (lag + pending); a missing group counts the whole stream.
func Unhandled(ctx context.Context, rdb redis.UniversalClient, topic Topic, groups ...string) (int64, error) {
	var n int64
	for p := range topic.Partitions {
		s := topic.Stream(p)
		infos, err := rdb.XInfoGroups(ctx, s).Result()
		if err != nil {
			if strings.HasPrefix(err.Error(), "ERR no such key") {
				continue // nothing published to this partition yet
			}
			return 0, fmt.Errorf("xinfo groups: %w", err)
		}
		for _, name := range groups {
			i := slices.IndexFunc(infos, func(g redis.XInfoGroup) bool { return g.Name == name })
			if i < 0 {
				l, err := rdb.XLen(ctx, s).Result()
				if err != nil {
					return 0, fmt.Errorf("xlen: %w", err)
				}
				n += l
				continue
			}
			g := infos[i]
			n += g.Pending
			if g.Lag >= 0 {
				n += g.Lag
				continue
			}
			// The lag is unknown (entries were deleted): one more if
			// entries follow the last delivered.
			last, err := rdb.XRevRangeN(ctx, s, "+", "-", 1).Result()
			if err != nil {
				return 0, fmt.Errorf("xrevrange: %w", err)
			}
			if len(last) > 0 && last[0].ID != g.LastDeliveredID {
				n++
			}
		}
	}
	return n, nil
}
