package availbench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/collector"
	"github.com/dropstream/dropstream/collector/simulator"
	"github.com/dropstream/dropstream/flows/avail/watch"
	"github.com/dropstream/dropstream/internal/benchstat"
	"github.com/dropstream/dropstream/internal/bounds"
	"github.com/dropstream/dropstream/internal/egress"
	"github.com/dropstream/dropstream/internal/progress"
	"github.com/dropstream/dropstream/internal/settings"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/stream"
)

// ReleaseConfig describes the release bench: Venues release a date daily
// at ReleaseAt, polled at Interval; HistoryDays run at the fixed interval,
// then LearnedDays with bursts at the learned times. Zero fields default.
type ReleaseConfig struct {
	// Venues is the number of venues, 1..100. Default 20.
	Venues int `flag:"release-venues" default:"20" range:"1..100" help:"--release: simulated venues, one watcher each"`
	// HistoryDays and LearnedDays, each 1..30. Default 3 and 3.
	HistoryDays int `flag:"release-history-days" default:"3" range:"1..30" help:"--release: days at the fixed interval, learned from"`
	LearnedDays int `flag:"release-learned-days" default:"3" range:"1..30" help:"--release: days with bursts around the learned times"`
	// Interval is the sources' poll interval. Default 60s.
	Interval time.Duration `flag:"release-interval" default:"1m" help:"--release: the sources' poll interval"`
	// Burst is the poll interval around a learned release. Default 5s.
	Burst time.Duration `flag:"release-burst" default:"5s" help:"--release: the poll interval around a learned release"`
	// Stabilization is the sources' k. Default 2.
	Stabilization int `default:"2"`
	// Scale is how much faster than the wall clock the virtual clock runs,
	// 1..600. Default 60.
	Scale float64 `flag:"release-scale" default:"60" range:"1..600" help:"--release: virtual time runs this many times faster than the wall clock (processing time is multiplied by it too)"`
	// ReleaseAt is the release's time of day (UTC). Default 10:00.
	ReleaseAt time.Duration `default:"10h"`
	// Telemetry instruments the stages; Phases receives progress lines.
	Telemetry stream.Telemetry
	Phases    *progress.Printer
}

// WithDefaults returns c with every zero field set to its default.
func (c ReleaseConfig) WithDefaults() ReleaseConfig {
	settings.Defaults(&c)
	return c
}

// Validate reports every invalid field of a defaulted config.
func (c ReleaseConfig) Validate() error {
	errs := []error{settings.Check("availbench", &c)}
	if c.Interval < collector.MinInterval || c.Interval > time.Hour || c.Burst < collector.MinInterval || c.Burst > c.Interval {
		errs = append(errs, fmt.Errorf("availbench: interval %s and burst %s: want 1s ≤ burst ≤ interval ≤ 1h", c.Interval, c.Burst))
	}
	errs = bounds.Check(errs, "availbench: stabilization", c.Stabilization, 1, collector.MaxStabilization)
	errs = bounds.CheckText(errs, "availbench: release at", c.ReleaseAt, 10*time.Minute, 23*time.Hour, "10m..23h")
	return errors.Join(errs...)
}

// ReleaseLatency is the release → webhook latency of one phase, in virtual
// time.
type ReleaseLatency struct {
	// Expected and Received count the notices (one per open slot of a
	// released date and watcher).
	Expected, Received int
	benchstat.Latencies
	// Polls is the number of requests the simulator answered in the phase.
	Polls int64
}

// ReleaseResult is what RunRelease measured.
type ReleaseResult struct {
	Fixed, Learned ReleaseLatency
	// Peaks are the learned release peaks of the first venue.
	Peaks []collector.ReleasePeak
}

// benchDay0 is the first day of the release bench.
var benchDay0 = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)

// RunRelease runs the release bench on rdb (an empty database): the
// collector on a virtual clock, the simulator, the stages and a receiver.
func RunRelease(ctx context.Context, rdb redis.UniversalClient, cfg ReleaseConfig) (res ReleaseResult, err error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return res, err
	}
	days := cfg.HistoryDays + cfg.LearnedDays
	b, err := Open(ctx, rdb, Config{Scopes: cfg.Venues, PerScope: 1, Partitions: 1, Telemetry: cfg.Telemetry, Phases: cfg.Phases})
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, b.Close()) }()
	done := make(chan struct{})
	defer close(done)
	clock := newVClock(benchDay0.Add(cfg.ReleaseAt-4*time.Minute), cfg.Scale, done)

	// The simulator: a new date per day, released at ReleaseAt.
	var dates []string
	var releases []simulator.Release
	releasedAt := map[string]time.Time{}
	for d := range days {
		day := benchDay0.AddDate(0, 0, d)
		date := day.AddDate(0, 0, 30).Format(time.DateOnly)
		dates, releasedAt[date] = append(dates, date), day.Add(cfg.ReleaseAt)
		releases = append(releases, simulator.Release{Date: date, At: releasedAt[date]})
	}
	simCfg := simulator.Config{Venues: cfg.Venues, Dates: dates, PartySizes: []int{2}, Now: clock.Now}
	// full is the same static world with every date out: the slots each
	// release opens, hence the notices expected.
	full, err := simulator.New(simCfg)
	if err != nil {
		return res, err
	}
	simCfg.Releases = releases
	sim, err := simulator.New(simCfg)
	if err != nil {
		return res, err
	}
	var polls atomic.Int64
	simSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		polls.Add(1)
		sim.ServeHTTP(w, r)
	}))
	defer simSrv.Close()
	recv := newReceiver(clock.Now, func(ev watch.OpenEvent, now time.Time) (string, time.Duration, bool) {
		at, ok := releasedAt[ev.Entity.Date]
		return ev.Entity.Date, now.Sub(at), ok && ev.Event == watch.EventAvailabilityOpen
	})
	hook := httptest.NewServer(recv)
	defer hook.Close()

	// The pipeline after the collector, and a watcher per venue.
	store, stages, release, err := b.pipeline(hook.Listener.Addr().String())
	if err != nil {
		return res, err
	}
	defer release()
	stages = append(stages, collector.NewNormalizer(b.topics, b.pub))
	stop, err := b.run(ctx, 1, stages...)
	if err != nil {
		return res, err
	}
	defer stop()
	var scopes []avail.Scope
	for _, v := range sim.Venues() {
		id := strconv.FormatInt(v.ID, 10)
		if _, err := store.Create(ctx, watch.Watcher{Name: "release " + id, Provider: "resy", Venue: id,
			Channel: notifier.ChannelWebhook, WebhookURL: hook.URL + "/hook"}); err != nil {
			return res, fmt.Errorf("availbench: watcher: %w", err)
		}
		for _, d := range dates {
			scopes = append(scopes, avail.Scope{Venue: id, Date: d, PartySize: 2})
		}
	}

	// The collector, as the flow runs it, on the virtual clock.
	policy, err := egress.New(egress.Config{Allow: []string{simSrv.Listener.Addr().String()}})
	if err != nil {
		return res, err
	}
	learner := &streamLearner{b: b}
	c, err := collector.NewCollector(b.topics, b.pub, collector.CollectorConfig{Egress: policy, Clock: clock, Telemetry: cfg.Telemetry,
		Releases: collector.ReleaseConfig{Learner: learner, Burst: cfg.Burst, Refresh: 24 * time.Hour}})
	if err != nil {
		return res, err
	}
	defer func() { _ = c.Close() }()
	learner.off.Store(true) // nothing to learn before the history
	if err := c.Upsert(collector.Source{ID: "sim", Provider: "resy", BaseURL: simSrv.URL, Scopes: scopes,
		Interval: cfg.Interval, Stabilization: cfg.Stabilization, RateLimit: 100}); err != nil {
		return res, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	runDone := make(chan error, 1)
	go func() { runDone <- c.Run(runCtx) }()
	defer func() { cancel(); err = errors.Join(err, <-runDone) }()

	for d := range days {
		phase := &res.Fixed
		if d == cfg.HistoryDays {
			learner.off.Store(false)
			if err := c.Learn(ctx); err != nil {
				return res, err
			}
			res.Peaks = c.Releases().Peaks("sim", strconv.FormatInt(sim.Venues()[0].ID, 10))
			b.cfg.Phases.Printf("release: learned %d venues' release times, first venue %+v", c.Releases().Len(), res.Peaks)
		}
		if d >= cfg.HistoryDays {
			phase = &res.Learned
		}
		day := benchDay0.AddDate(0, 0, d)
		clock.JumpTo(day.Add(cfg.ReleaseAt - 4*time.Minute))
		p0 := polls.Load()
		want := 0
		for _, v := range full.Venues() {
			want += len(full.Open("resy", avail.Scope{Venue: strconv.FormatInt(v.ID, 10), Date: dates[d], PartySize: 2}))
		}
		phase.Expected += want
		deadline := day.Add(cfg.ReleaseAt + 30*time.Minute)
		if err := benchstat.Until(ctx, 5*time.Millisecond, func() (bool, error) {
			return recv.count(dates[d]) >= want || !clock.Now().Before(deadline), nil
		}); err != nil {
			return res, err
		}
		phase.Polls += polls.Load() - p0
		b.cfg.Phases.Printf("release: day %d (%s): %d/%d notices", d+1, dates[d], recv.count(dates[d]), want)
	}
	res.Fixed.Received, _, res.Fixed.Latencies = recv.summary(dates[:cfg.HistoryDays]...)
	res.Learned.Received, _, res.Learned.Latencies = recv.summary(dates[cfg.HistoryDays:]...)
	return res, nil
}

// streamLearner is the flow's release rule read from the transitions
// stream in Redis.
type streamLearner struct {
	b   *Harness
	off atomic.Bool
}

func (l *streamLearner) ReleaseObservations(ctx context.Context) ([]collector.ReleaseObservation, error) {
	if l.off.Load() {
		return nil, nil
	}
	type key struct{ source, venue, date string }
	first := map[key]avail.Transition{}
	err := l.b.eachTransition(ctx, func(tr avail.Transition) {
		if !tr.Raw || tr.Kind != avail.KindOpen || tr.Entity.Venue == "" {
			return
		}
		k := key{tr.SourceID, tr.Entity.Venue, tr.Entity.Date}
		if f, ok := first[k]; !ok || tr.RunAt.Before(f.RunAt) {
			first[k] = tr
		}
	})
	if err != nil {
		return nil, err
	}
	var out []collector.ReleaseObservation
	for k, tr := range first {
		if !tr.Baseline {
			out = append(out, collector.ReleaseObservation{SourceID: k.source, Venue: k.venue, Date: k.date, At: tr.RunAt})
		}
	}
	return out, nil
}

// vclock is a collector.Clock on virtual time, Scale times faster, that
// can jump ahead, so a day of polling runs in seconds.
type vclock struct {
	scale float64
	done  <-chan struct{}

	mu     sync.Mutex
	real0  time.Time
	virt0  time.Time
	jumped chan struct{} // closed and replaced at each jump
}

func newVClock(start time.Time, scale float64, done <-chan struct{}) *vclock {
	return &vclock{scale: scale, done: done, real0: time.Now(), virt0: start, jumped: make(chan struct{})}
}

// Now returns the virtual time.
func (c *vclock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nowLocked()
}

func (c *vclock) nowLocked() time.Time {
	return c.virt0.Add(time.Duration(float64(time.Since(c.real0)) * c.scale))
}

// JumpTo moves the virtual time to t, if later, and fires the alarms it
// reaches.
func (c *vclock) JumpTo(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !t.After(c.nowLocked()) {
		return
	}
	c.real0, c.virt0 = time.Now(), t
	close(c.jumped)
	c.jumped = make(chan struct{})
}

// Alarm returns a channel that receives once the virtual time reaches t.
func (c *vclock) Alarm(t time.Time) <-chan time.Time {
	ch := make(chan time.Time, 1)
	go func() {
		for {
			c.mu.Lock()
			now, jumped := c.nowLocked(), c.jumped
			c.mu.Unlock()
			if !t.After(now) {
				ch <- now
				return
			}
			timer := time.NewTimer(time.Duration(float64(t.Sub(now)) / c.scale))
			select {
			case <-timer.C:
			case <-jumped:
				timer.Stop()
			case <-c.done:
				timer.Stop()
				return
			}
		}
	}()
	return ch
}
