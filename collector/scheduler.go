package collector

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/dropstream/dropstream/internal/rediskey"
	dsotel "github.com/dropstream/dropstream/otel"
	"github.com/dropstream/dropstream/stream"
)

// job is one scheduled poll of scope number scope of a source's
// configuration of generation gen.
type job struct {
	due    time.Time
	source string
	gen    uint64
	scope  int
	// reserved: the job holds a rate-limit turn at due.
	reserved bool
}

// jobHeap orders jobs by due time.
type jobHeap []*job

func (h jobHeap) Len() int           { return len(h) }
func (h jobHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h jobHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *jobHeap) Push(x any)        { *h = append(*h, x.(*job)) }
func (h *jobHeap) Pop() any {
	old := *h
	j := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return j
}
func (h *jobHeap) push(j *job) { heap.Push(h, j) }

// Run polls every scope every jittered Interval until ctx ends, then waits
// for the polls in flight, and syncs the Store every RefreshInterval. Only
// one Run may be active.
func (c *Collector) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return errors.New("collector: already running")
	}
	defer c.running.Store(false)

	work := make(chan *job)
	var wg sync.WaitGroup
	for range c.cfg.Concurrency {
		wg.Go(func() {
			for j := range work {
				c.runJob(ctx, j)
			}
		})
	}
	defer func() {
		close(work)
		wg.Wait()
	}()

	if c.cfg.Releases.Learner != nil {
		wg.Go(func() { c.learnLoop(ctx) })
	}
	var refresh <-chan time.Time
	if c.cfg.Store != nil {
		c.sync(ctx)
		refresh = c.cfg.Clock.Alarm(c.cfg.Clock.Now().Add(c.cfg.RefreshInterval))
	}
	for {
		ready, next := c.due()
		for _, j := range ready {
			select {
			case work <- j:
			case <-ctx.Done():
				return nil
			}
		}
		if len(ready) > 0 {
			continue // time has moved while dispatching
		}
		var alarm <-chan time.Time
		if !next.IsZero() {
			alarm = c.cfg.Clock.Alarm(next)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-c.wake:
		case <-alarm:
		case <-refresh:
			c.sync(ctx)
			refresh = c.cfg.Clock.Alarm(c.cfg.Clock.Now().Add(c.cfg.RefreshInterval))
		}
	}
}

// sync reloads sources from the store, logging failures.
func (c *Collector) sync(ctx context.Context) {
	if err := c.Sync(ctx); err != nil && ctx.Err() == nil {
		c.log.WarnContext(ctx, "source refresh failed", "error", err)
	}
}

// due pops the jobs ready now and returns the next due time (zero: none),
// dropping jobs of removed, changed or paused sources.
func (c *Collector) due() ([]*job, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.cfg.Clock.Now()
	var ready []*job
	for c.jobs.Len() > 0 && !c.jobs[0].due.After(now) {
		j := heap.Pop(&c.jobs).(*job)
		st, ok := c.sources[j.source]
		if !ok || st.gen != j.gen || st.health.Paused || j.scope >= len(st.src.Scopes) {
			continue
		}
		if _, held := st.bucket.Paused(now); held || !j.reserved {
			j.due, j.reserved = st.bucket.Reserve(now), true
			if j.due.After(now) {
				c.jobs.push(j)
				continue
			}
		}
		ready = append(ready, j)
	}
	var next time.Time
	if c.jobs.Len() > 0 {
		next = c.jobs[0].due
	}
	return ready, next
}

// runJob polls one scheduled scope and schedules its next poll.
func (c *Collector) runJob(ctx context.Context, j *job) {
	c.mu.Lock()
	st, ok := c.sources[j.source]
	if !ok || st.gen != j.gen || st.health.Paused {
		c.mu.Unlock()
		return
	}
	src := st.src
	c.mu.Unlock()
	gate := ""
	if c.gate != nil {
		scopeKey := src.Scopes[j.scope].Key(src.ID) // the gate is in the scope's raw partition
		gate = rediskey.Key(c.topics.Raw.HashTag(c.topics.Raw.Partition(scopeKey)), "gate", scopeKey)
		ok, wait, err := c.gate.Take(ctx, gate, c.cfg.Timeout+gateMargin)
		switch {
		case err != nil:
			c.log.WarnContext(ctx, "poll gate unavailable; trying again later", "source", src.ID, "error", err)
			c.reschedule(j, src.Interval)
			return
		case !ok:
			// Another copy polls the scope: come back when its gate opens,
			// or after an interval at most.
			c.reschedule(j, min(wait, src.Interval))
			return
		}
	}
	res, err := c.poll(ctx, src, j.gen, j.scope)
	if err != nil {
		if ctx.Err() != nil {
			if gate != "" {
				_ = c.gate.Open(context.WithoutCancel(ctx), gate) // another copy may poll it now
			}
			return // shutting down: nothing to schedule
		}
		c.log.ErrorContext(ctx, "poll not recorded", "source", src.ID, "error", err)
		res.outcome = OutcomeFailed
		res.failures = 1
	}
	if res.outcome == OutcomeAuthExpired {
		return // paused until the configuration changes
	}
	delay := c.releaseDelay(src, j.scope, res, c.nextDelay(src.Interval, res))
	if gate != "" {
		if delay, err = c.gate.Hold(ctx, gate, delay); err != nil {
			c.log.WarnContext(ctx, "poll gate not held; another copy may poll early", "source", src.ID, "error", err)
		}
	}
	c.reschedule(j, delay)
}

// reschedule books job j's next poll in d, unless its source changed, went
// or paused meanwhile.
func (c *Collector) reschedule(j *job, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.sources[j.source]; ok && st.gen == j.gen && !st.health.Paused {
		c.jobs.push(&job{due: c.cfg.Clock.Now().Add(d), source: j.source, gen: j.gen, scope: j.scope})
		c.signal()
	}
}

// nextDelay is the delay before polling a scope again after res.
func (c *Collector) nextDelay(interval time.Duration, res pollResult) time.Duration {
	d := interval
	if res.outcome != OutcomeOK && res.failures > 1 {
		d = stream.BackoffAfter(res.failures, interval, max(c.cfg.MaxBackoff, interval))
	}
	d = c.jitter(d)
	if res.outcome == OutcomeThrottled {
		d = max(d, res.retryAfter)
	}
	return d
}

// jitter scales d by a random factor in [1-Jitter, 1+Jitter].
func (c *Collector) jitter(d time.Duration) time.Duration {
	if c.cfg.NoJitter {
		return d
	}
	return time.Duration(float64(d) * (1 + c.cfg.Jitter*(2*rand.Float64()-1)))
}

// firstDelay is the delay before the first poll of a new or changed scope:
// a random part of one jitter window, so many scopes do not start at once.
func (c *Collector) firstDelay(interval time.Duration) time.Duration {
	if c.cfg.NoJitter {
		return 0
	}
	return time.Duration(float64(interval) * c.cfg.Jitter * rand.Float64())
}

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
