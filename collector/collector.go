package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/internal/pollgate"
	"github.com/dropstream/dropstream/internal/ratelimit"
	dsotel "github.com/dropstream/dropstream/otel"
	"github.com/dropstream/dropstream/stream"
)

// Collector polls sources and publishes every poll as an avail.RawRun.
// Sources come from Upsert and Remove, or a Store through Sync. It is safe
// for concurrent use.
type Collector struct {
	topics avail.Topics
	pub    *stream.Publisher
	cfg    CollectorConfig
	log    *slog.Logger
	tracer trace.Tracer
	met    *metrics

	// healthMu serializes health updates with the publication of the
	// source transitions they cause, so transitions go out in order.
	healthMu sync.Mutex

	mu      sync.Mutex
	sources map[string]*sourceState
	buckets map[string]*ratelimit.Bucket
	gate    *pollgate.Gate // with CollectorConfig.Shared
	jobs    jobHeap
	wake    chan struct{}
	// releases is the learned release schedule (CollectorConfig.Releases).
	releases ReleaseSchedule
	running  atomic.Bool
}

// sourceState is the collector's view of one source.
type sourceState struct {
	src Source // with defaults applied
	fp  string
	// gen changes with every configuration change; polls and scheduled
	// jobs of an older generation leave no trace on the new one.
	gen    uint64
	health SourceHealth
	bucket *ratelimit.Bucket
}

// NewCollector returns a collector publishing raw runs and source
// transitions to topics through pub.
func NewCollector(topics avail.Topics, pub *stream.Publisher, cfg CollectorConfig) (*Collector, error) {
	if pub == nil {
		return nil, errors.New("collector: publisher is nil")
	}
	if err := errors.Join(topics.Raw.Validate(), topics.Transitions.Validate()); err != nil {
		return nil, fmt.Errorf("collector: %w", err)
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("collector: %w", err)
	}
	tel := cfg.Telemetry.WithDefaults()
	cfg.Telemetry = tel
	c := &Collector{topics: topics, pub: pub, cfg: cfg, log: tel.Logger,
		tracer:  tel.TracerProvider.Tracer(dsotel.ScopeName, trace.WithSchemaURL(dsotel.SchemaURL)),
		sources: map[string]*sourceState{}, buckets: map[string]*ratelimit.Bucket{}, wake: make(chan struct{}, 1)}
	met, err := newMetrics(tel.MeterProvider, c.failureCounts)
	if err != nil {
		return nil, fmt.Errorf("collector: %w", err)
	}
	c.met = met
	if cfg.Shared != nil {
		if c.gate, err = pollgate.New(cfg.Shared, pollgate.Config{Owner: cfg.Owner}); err != nil {
			return nil, fmt.Errorf("collector: %w", err)
		}
	}
	return c, nil
}

// Close releases the metric callback; the collector must not be used after.
func (c *Collector) Close() error { return c.met.reg.Unregister() }

// Upsert adds or replaces a source (ErrInvalidSource if invalid); a changed
// configuration lifts an auth pause and reschedules every scope.
func (c *Collector) Upsert(src Source) error {
	if err := src.Validate(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.upsertLocked(src.WithDefaults()) {
		c.rebucketLocked()
		c.signal()
	}
	return nil
}

// upsertLocked applies a valid, defaulted source; true if anything changed.
func (c *Collector) upsertLocked(src Source) bool {
	fp := src.Fingerprint()
	st, ok := c.sources[src.ID]
	if ok && st.fp == fp {
		return false
	}
	if !ok {
		st = &sourceState{health: SourceHealth{SourceID: src.ID, Status: StatusUp}}
		c.sources[src.ID] = st
	}
	st.src, st.fp = src, fp
	st.gen++
	st.health.Paused = false
	st.health.Status = st.health.status()
	now := c.cfg.Clock.Now()
	for i := range src.Scopes {
		c.jobs.push(&job{due: now.Add(c.firstDelay(src.Interval)), source: src.ID, gen: st.gen, scope: i})
	}
	return true
}

// Remove forgets a source and its scheduled polls; unknown: ErrSourceNotFound.
func (c *Collector) Remove(id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.sources[id]; !ok {
		return fmt.Errorf("%w: %q", ErrSourceNotFound, clip.Marked(id, maxQuoted))
	}
	delete(c.sources, id)
	c.rebucketLocked()
	return nil
}

// Sync makes the sources those of CollectorConfig.Store. With unreadable
// entries it applies the rest, removes nothing and returns the error.
func (c *Collector) Sync(ctx context.Context) error {
	if c.cfg.Store == nil {
		return errors.New("collector: sync needs CollectorConfig.Store")
	}
	srcs, err := c.cfg.Store.List(ctx)
	if srcs == nil && err != nil {
		return err
	}
	keep := make(map[string]bool, len(srcs))
	c.mu.Lock()
	defer c.mu.Unlock()
	changed := false
	for _, src := range srcs {
		keep[src.ID] = true
		changed = c.upsertLocked(src) || changed
	}
	if err == nil {
		for id := range c.sources {
			if !keep[id] {
				delete(c.sources, id)
				changed = true
			}
		}
	}
	if changed {
		c.rebucketLocked()
		c.signal()
	}
	return err
}

// rebucketLocked gives every source the bucket of its provider host, at the
// smallest rate of the sources sharing it, and drops unused buckets.
func (c *Collector) rebucketLocked() {
	rates := map[string]float64{}
	for _, st := range c.sources {
		k := bucketKey(st.src)
		if r, ok := rates[k]; !ok || st.src.RateLimit < r {
			rates[k] = st.src.RateLimit
		}
	}
	for k, r := range rates {
		if b, ok := c.buckets[k]; ok {
			b.SetRate(r)
		} else {
			c.buckets[k] = ratelimit.NewBucket(r, c.cfg.Burst)
		}
	}
	for k := range c.buckets {
		if _, ok := rates[k]; !ok {
			delete(c.buckets, k)
		}
	}
	for _, st := range c.sources {
		st.bucket = c.buckets[bucketKey(st.src)]
	}
}

// signal wakes Run's scheduling loop.
func (c *Collector) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Health returns a source's health, or an error wrapping ErrSourceNotFound.
func (c *Collector) Health(id string) (SourceHealth, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.sources[id]
	if !ok {
		return SourceHealth{}, fmt.Errorf("%w: %q", ErrSourceNotFound, clip.Marked(id, maxQuoted))
	}
	return st.health, nil
}

// failureCounts yields every source's consecutive failures, for metrics.
func (c *Collector) failureCounts(yield func(sourceID, provider string, failures int)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, st := range c.sources {
		yield(id, st.src.Provider, st.health.ConsecutiveFailures)
	}
}

// PollOnce polls every scope of a source once, within its rate limit;
// failed fetches are failed runs. It returns ErrSourceNotFound,
// ErrAuthExpired, the context's error or a publish failure.
func (c *Collector) PollOnce(ctx context.Context, sourceID string) error {
	c.mu.Lock()
	st, ok := c.sources[sourceID]
	if !ok {
		c.mu.Unlock()
		return fmt.Errorf("%w: %q", ErrSourceNotFound, clip.Marked(sourceID, maxQuoted))
	}
	src, gen, b, paused := st.src, st.gen, st.bucket, st.health.Paused
	c.mu.Unlock()
	if paused {
		return fmt.Errorf("source %s: %w", sourceID, ErrAuthExpired)
	}
	for i := range src.Scopes {
		if err := c.waitTurn(ctx, b); err != nil {
			return err
		}
		res, err := c.poll(ctx, src, gen, i)
		if err != nil {
			return err
		}
		if res.outcome == OutcomeAuthExpired {
			return fmt.Errorf("source %s: %w", sourceID, ErrAuthExpired)
		}
	}
	return nil
}

// waitTurn reserves a request in b and waits for its time on the clock.
func (c *Collector) waitTurn(ctx context.Context, b *ratelimit.Bucket) error {
	now := c.cfg.Clock.Now()
	at := b.Reserve(now)
	if !at.After(now) {
		return ctx.Err()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-c.cfg.Clock.Alarm(at):
		return nil
	}
}

// Clock is the collector's source of time: run timestamps, schedules, rate
// limits and backoff all read it. Tests inject a fake one to control time.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// Alarm returns a channel that receives once the clock reaches t, at
	// once when t is not after Now.
	Alarm(t time.Time) <-chan time.Time
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// Alarm returns time.After(time.Until(t)).
func (SystemClock) Alarm(t time.Time) <-chan time.Time { return time.After(time.Until(t)) }

// bucketKey is the politeness domain of a source: its provider and its
// base URL's host. Sources of one domain share one ratelimit.Bucket.
func bucketKey(src Source) string {
	host := src.BaseURL
	if u, err := url.Parse(src.BaseURL); err == nil {
		host = u.Host
	}
	return src.Provider + " " + host
}
