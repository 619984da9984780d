package collector

import (
	"container/heap"
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

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
	c.mu.Lock()
	if c.running {
		c.mu.Unlock()
		return errors.New("collector: already running")
	}
	c.running = true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.running = false
		c.mu.Unlock()
	}()

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
		gate = c.gateKey(src.Scopes[j.scope].Key(src.ID))
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
