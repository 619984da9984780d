package comicbench

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/dropstream/dropstream/flows/comic"
	"github.com/dropstream/dropstream/internal/benchstat"
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
