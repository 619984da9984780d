package comicbench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/dropstream/dropstream/flows/comic"
	"github.com/dropstream/dropstream/internal/benchstat"
	"github.com/dropstream/dropstream/internal/tick"
	"github.com/dropstream/dropstream/stream"
)

// matchRound is the number of comics measured between two drains of the
// notify streams.
const matchRound = 100

// measureMatch times MatchIDs and Matcher.Process on cfg.Matches comics in
// rounds: lookups, then jobs of generation 1 with the discarding group
// paused, so the CPU figures are the matching's alone; the group drains the
// notify streams between rounds.
func measureMatch(ctx context.Context, rdb redis.UniversalClient, svc *comic.Flow, w *world, cfg Config, res *Result, d *drain) error {
	lookups := make([]time.Duration, 0, cfg.Matches)
	jobs := make([]time.Duration, 0, cfg.Matches)
	matched := make([]int, 0, cfg.Matches)
	examined := make([]int, 0, cfg.Matches)
	var lookupCPU, jobCPU benchstat.CPU // summed over the rounds
	total := 0
	// The title (no pattern of either world constrains it) makes each run's
	// comics new, so a run over reused subscriptions finds no job of an
	// earlier run done.
	stamp := strconv.FormatInt(time.Now().UnixNano(), 36)
	phase := cfg.Phases.Start("match comics", int64(cfg.Matches))
	defer phase.Done("")
	for start := 0; start < cfg.Matches; start += matchRound {
		round := make([]comic.Comic, min(matchRound, cfg.Matches-start))
		for i := range round {
			round[i] = w.comic()
			round[i].Title += " " + stamp
		}
		d.pause()
		before := benchstat.ReadCPU(ctx, rdb)
		for _, c := range round {
			t0, e0 := time.Now(), svc.Matcher.Examined()
			ids, err := svc.Matcher.MatchIDs(ctx, c)
			if err != nil {
				d.resume()
				return err
			}
			lookups = append(lookups, time.Since(t0))
			examined = append(examined, int(svc.Matcher.Examined()-e0))
			matched = append(matched, len(ids))
			total += len(ids)
		}
		mid := benchstat.ReadCPU(ctx, rdb)
		for _, c := range round {
			job := comic.Job{ComicID: c.ID(), Gen: 1, AddedAtMs: time.Now().UnixMilli(), Comic: c.Canonical()}
			t0 := time.Now()
			if _, err := svc.Matcher.Process(ctx, job); err != nil {
				d.resume()
				return err
			}
			jobs = append(jobs, time.Since(t0))
		}
		lc, jc := mid.PerItem(before, 1), benchstat.ReadCPU(ctx, rdb).PerItem(mid, 1)
		d.resume()
		lookupCPU, jobCPU = lookupCPU.Plus(lc), jobCPU.Plus(jc)
		if err := d.waitDrained(ctx); err != nil {
			return err
		}
		phase.Set(int64(start + len(round)))
	}
	phase.Done("")
	res.LookupCPU, res.JobCPU = lookupCPU.Per(cfg.Matches), jobCPU.Per(cfg.Matches)
	res.MeanMatched = float64(total) / float64(cfg.Matches)
	res.Lookup, res.Job = benchstat.Summarize(lookups), benchstat.Summarize(jobs)
	slices.Sort(matched)
	res.MatchedP50, res.MatchedP90, res.MatchedP99 = benchstat.Quantile(matched, 0.50), benchstat.Quantile(matched, 0.90), benchstat.Quantile(matched, 0.99)
	res.MaxMatched = matched[len(matched)-1]
	slices.Sort(examined)
	for _, n := range examined {
		res.MeanExamined += float64(n) / float64(len(examined))
	}
	res.ExaminedP99, res.MaxExamined = benchstat.Quantile(examined, 0.99), examined[len(examined)-1]
	cfg.Phases.Printf("lookups p50 %s p99 %s (cpu %s + redis %s per comic); job p50 %s p99 %s max %s (cpu %s + redis %s per comic); "+
		"subscriptions per comic: mean %.1f, p50 %d, p90 %d, p99 %d, max %d; examined: mean %.1f, p99 %d, max %d",
		res.Lookup.P50, res.Lookup.P99, res.LookupCPU.Process, res.LookupCPU.Redis, res.Job.P50, res.Job.P99, res.Job.Max,
		res.JobCPU.Process, res.JobCPU.Redis, res.MeanMatched, res.MatchedP50, res.MatchedP90, res.MatchedP99, res.MaxMatched,
		res.MeanExamined, res.ExaminedP99, res.MaxExamined)
	return nil
}

// measureIntake lists cfg.Intake new comics with cfg.Workers callers.
func measureIntake(ctx context.Context, svc *comic.Flow, w *world, cfg Config, res *Result) error {
	comics := make([]comic.Comic, cfg.Intake)
	stamp := strconv.FormatInt(time.Now().UnixNano(), 36)
	for i := range comics {
		comics[i] = w.comic()
		comics[i].Title = "Intake " + stamp + " " + strconv.Itoa(i) // distinct identities
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cfg.Workers)
	began := time.Now()
	for i := 0; i < len(comics); i += cfg.IntakeBatch {
		g.Go(func() error {
			if cfg.IntakeBatch == 1 {
				_, _, err := svc.Inventory.Add(gctx, comics[i])
				return err
			}
			_, err := svc.Inventory.AddMany(gctx, comics[i:min(i+cfg.IntakeBatch, len(comics))])
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	res.IntakePerSecond = float64(cfg.Intake) / time.Since(began).Seconds()
	cfg.Phases.Printf("listed %d comics at %.0f/s", cfg.Intake, res.IntakePerSecond)
	return nil
}

// measureMatcher runs the matching stage (one copy, its own batch size)
// over the intake backlog, with the discarding group consuming the notify
// streams, until both backlogs are empty.
func measureMatcher(ctx context.Context, rdb redis.UniversalClient, svc *comic.Flow, cfg Config, res *Result, d *drain) error {
	matcher := svc.Matcher.Stage()
	matcher.Config.Block = 50 * time.Millisecond
	// The group exists before its backlog is first read.
	if err := stream.EnsureGroups(ctx, rdb, svc.Topics().Jobs, matcher.Name); err != nil {
		return err
	}
	handed0 := d.handed.Load()
	cpu := benchstat.ReadCPU(ctx, rdb)
	began, last := time.Now(), time.Now()
	stop, err := stream.RunStages(ctx, rdb, stream.Telemetry{}, 1, matcher)
	if err != nil {
		return err
	}
	defer stop()
	var matched time.Duration
	if err := benchstat.Until(ctx, 20*time.Millisecond, func() (bool, error) {
		jobs, err := stream.Unhandled(ctx, rdb, svc.Topics().Jobs, matcher.Name)
		if err != nil {
			return false, err
		}
		if jobs == 0 && matched == 0 {
			matched = time.Since(began)
			res.MatcherCPU = benchstat.ReadCPU(ctx, rdb).PerItem(cpu, cfg.Intake)
		}
		notify, err := stream.Unhandled(ctx, rdb, svc.Topics().Notify, discardGroup)
		if err != nil {
			return false, err
		}
		n, err := streamLen(ctx, rdb, svc.Topics().Notify)
		if err != nil {
			return false, err
		}
		res.NotifyPeak = max(res.NotifyPeak, n)
		if time.Since(last) >= 5*time.Second && (jobs > 0 || notify > 0) {
			last = time.Now()
			cfg.Phases.Printf("matcher: %d jobs and %d notifications to go, notify streams %d entries, redis used_memory %d MB",
				jobs, notify, n, benchstat.UsedMemory(ctx, rdb)>>20)
		}
		return jobs == 0 && notify == 0, nil
	}); err != nil {
		return err
	}
	res.MatcherPerSecond = float64(cfg.Intake) / matched.Seconds()
	res.Handed = d.handed.Load() - handed0
	cfg.Phases.Printf("matcher stage: %d comics at %.0f/s (cpu %s + redis %s per comic), %d notify messages handed off (notify streams peaked at %d entries)",
		cfg.Intake, res.MatcherPerSecond, res.MatcherCPU.Process, res.MatcherCPU.Redis, res.Handed, res.NotifyPeak)
	return nil
}

// discardGroup consumes the notify topic in the bench: it acknowledges the
// requests without delivering them (delivery is not measured), so the
// trimmer can remove them.
const discardGroup = "comicbench-discard"

// drain is the discarding group on the notify topic and a trimmer removing
// what both groups acknowledged, running for the whole measurement. It
// can be paused, so a phase measures the matching's CPU alone.
type drain struct {
	rdb    redis.UniversalClient
	topic  stream.Topic
	gate   sync.RWMutex
	handed atomic.Int64
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startDrain starts the discarding group and the trimmer of the jobs and
// notify topics.
func startDrain(ctx context.Context, rdb redis.UniversalClient, svc *comic.Flow) (*drain, error) {
	if err := stream.EnsureGroups(ctx, rdb, svc.Topics().Notify, discardGroup); err != nil {
		return nil, err
	}
	d := &drain{rdb: rdb, topic: svc.Topics().Notify}
	discard := svc.Delivery.DiscardStage(discardGroup)
	discard.Config = stream.RunnerConfig{BatchSize: 1000, Block: 50 * time.Millisecond, HandlerTimeout: 20 * time.Second, ClaimIdle: 2 * time.Minute}
	inner := discard.BatchHandler
	discard.BatchHandler = func(ctx context.Context, msgs []*stream.Message) error {
		d.gate.RLock()
		defer d.gate.RUnlock()
		err := inner(ctx, msgs)
		if err == nil {
			d.handed.Add(int64(len(msgs)))
		}
		return err
	}
	r, err := stream.NewRunner(rdb, discard, stream.Telemetry{})
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithCancel(ctx)
	d.cancel = cancel
	trimmer := stream.NewTrimmer(rdb, stream.TrimConfig{MinAge: time.Millisecond, Interval: 200 * time.Millisecond}, nil,
		svc.Topics().Jobs, svc.Topics().Notify)
	d.wg.Go(func() { _ = r.Run(dctx) })
	d.wg.Go(func() { trimmer.Run(dctx) })
	return d, nil
}

// pause holds the discarding group's next batch until resume.
func (d *drain) pause()  { d.gate.Lock() }
func (d *drain) resume() { d.gate.Unlock() }

// waitDrained waits until the discarding group has acknowledged every
// notification request.
func (d *drain) waitDrained(ctx context.Context) error {
	return benchstat.Until(ctx, 20*time.Millisecond, func() (bool, error) {
		n, err := stream.Unhandled(ctx, d.rdb, d.topic, discardGroup)
		return n == 0, err
	})
}

func (d *drain) stop() {
	d.cancel()
	d.wg.Wait()
}

func streamLen(ctx context.Context, rdb redis.UniversalClient, topic stream.Topic) (int64, error) {
	var n int64
	for p := 0; p < topic.Partitions; p++ {
		l, err := rdb.XLen(ctx, topic.Stream(p)).Result()
		if err != nil {
			return 0, fmt.Errorf("comicbench: xlen: %w", err)
		}
		n += l
	}
	return n, nil
}

// memWatch samples Redis used_memory and cancels the run past the limit.
type memWatch struct {
	rdb   redis.UniversalClient
	limit int64
	peak  atomic.Int64
}

func (m *memWatch) start(ctx context.Context, cancel context.CancelCauseFunc) (stop func()) {
	wctx, stopWatch := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		tick.Every(wctx, 250*time.Millisecond, func() {
			used := benchstat.UsedMemory(wctx, m.rdb)
			m.peak.Store(max(m.peak.Load(), used))
			if used > m.limit {
				cancel(fmt.Errorf("%w: used_memory %d MB over %d MB", ErrMemory, used>>20, m.limit>>20))
			}
		})
	})
	return func() { stopWatch(); wg.Wait() }
}
