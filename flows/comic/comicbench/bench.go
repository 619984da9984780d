// Package comicbench measures the comic flow: it loads subscriptions drawn
// from one of the worlds in world.go, then measures match latency
// (lookups, and lookups plus the hand-off; no delivery), intake throughput
// and the matcher stage's throughput over the intake backlog. A discarding
// group consumes the notify streams, and a run stops when Redis used_memory
// passes Config.MaxRedisMemory.
package comicbench

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/flows/comic"
	"github.com/dropstream/dropstream/internal/benchstat"
	"github.com/dropstream/dropstream/internal/progress"
	"github.com/dropstream/dropstream/internal/rediskey"
	"github.com/dropstream/dropstream/internal/settings"
	"github.com/dropstream/dropstream/stream"
)

// Config configures a bench run. Zero fields take their defaults.
type Config struct {
	// Subscriptions to load. Default 1,000,000.
	Subscriptions int `flag:"subscriptions" default:"1000000" range:"1.." help:"subscriptions to load"`
	// LoadWorkers load subscriptions concurrently, each a pipeline of
	// scripts. Default 4.
	LoadWorkers int `flag:"load-workers" default:"4" range:"1.." help:"concurrent pipelines loading the subscriptions"`
	// Matches is the number of comics matched for the latency figures.
	// Default 5,000.
	Matches int `flag:"matches" default:"5000" range:"1.." help:"comics matched for the latency figures"`
	// Intake is the number of comics listed for the throughput figure.
	// Default 50,000.
	Intake int `flag:"intake" default:"50000" range:"1.." help:"comics listed for the intake figure"`
	// Workers are the concurrent intake callers. Default 16.
	Workers int `flag:"workers" default:"16" range:"1.." help:"concurrent intake callers"`
	// IntakeBatch is the number of comics one intake call lists in one
	// pipeline (Inventory.AddMany); 1 calls Inventory.Add per comic, as
	// POST /v1/comics does. Default 1.
	IntakeBatch int `flag:"intake-batch" default:"1" range:"1.." help:"comics per intake call (1: one script per call as POST /v1/comics; more: one pipeline of scripts)"`
	// Partitions of the flow. Default 8.
	Partitions int `default:"8" range:"1.."`
	// World is the data distribution, one of Worlds. Default
	// WorldWantList.
	World string `default:"wantlist"`
	// Seed makes the data reproducible. Default 1.
	Seed uint64 `default:"1"`
	// Reuse measures over the subscriptions already loaded (by an earlier
	// run) instead of loading new ones.
	Reuse bool `flag:"reuse" help:"measure over the subscriptions an earlier run loaded with the same --world (no load)"`
	// MaxRedisMemory stops the run (with an error) when Redis used_memory
	// passes it. Default 4 GiB.
	MaxRedisMemory int64 `default:"4294967296" range:"1.."`
	// Phases, when set, receives progress lines and shows the loading and
	// the matching with their counts.
	Phases *progress.Printer
}

// ErrMemory: Redis used_memory passed Config.MaxRedisMemory; the run was
// stopped.
var ErrMemory = errors.New("comicbench: redis memory limit passed")

// Result are the measured figures.
type Result struct {
	Subscriptions int
	Load          time.Duration
	ActivePattern int
	// Lookup is Matcher.MatchIDs (the index lookups); Job is
	// Matcher.Process (lookups plus the hand-off to the notify stream).
	// Each is timed one comic at a time.
	Lookup, Job benchstat.Latencies
	// Matched is the distribution of subscriptions matched per comic.
	MeanMatched                                    float64
	MatchedP50, MatchedP90, MatchedP99, MaxMatched int
	// Examined is the distribution of index entries the lookups read per
	// comic: the matched ones and the range candidates they filtered out.
	MeanExamined             float64
	ExaminedP99, MaxExamined int
	// LookupCPU and JobCPU are the CPU time per comic of this process and
	// of Redis, measured while nothing else of the bench ran.
	LookupCPU, JobCPU benchstat.CPU
	IntakePerSecond   float64
	// MatcherPerSecond is the matcher stage's throughput (one copy) over the
	// intake backlog; MatcherCPU its CPU per comic, the discarding group's
	// included.
	MatcherPerSecond float64
	MatcherCPU       benchstat.CPU
	// Handed is the notify messages the matcher stage handed off;
	// NotifyPeak the notify streams' longest total length.
	Handed, NotifyPeak int64
	// RedisMemory is used_memory after loading and at the end; PeakMemory
	// the highest seen by the watch.
	RedisMemoryLoaded, RedisMemory, PeakMemory int64
}

// Run loads the subscriptions into rdb (which must hold no comic
// subscriptions unless Reuse) and measures.
func Run(ctx context.Context, rdb redis.UniversalClient, cfg Config) (Result, error) {
	if err := errors.Join(settings.Prepare("comicbench", &cfg), checkWorld(cfg.World)); err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	watch := &memWatch{rdb: rdb, limit: cfg.MaxRedisMemory}
	stopWatch := watch.start(ctx, cancel)
	defer stopWatch()
	res, err := run(ctx, rdb, cfg)
	if cause := context.Cause(ctx); errors.Is(cause, ErrMemory) {
		err = cause
	}
	res.PeakMemory = watch.peak.Load()
	return res, err
}

func run(ctx context.Context, rdb redis.UniversalClient, cfg Config) (Result, error) {
	svc, err := comic.NewWith(rdb, comic.Config{Partitions: cfg.Partitions}, nil, stream.Telemetry{})
	if err != nil {
		return Result{}, err
	}
	var res Result
	loaded, err := svc.Subscriptions.Stats(ctx)
	if err != nil || (loaded.Subscriptions > 0 && !cfg.Reuse) {
		return Result{}, fmt.Errorf("comicbench: the database must hold no comic subscriptions (%d, %v)", loaded.Subscriptions, err)
	}
	w := newWorld(cfg.World, cfg.Seed)
	began := time.Now()
	if cfg.Reuse {
		if err := checkLoadedWorld(ctx, rdb, cfg); err != nil {
			return Result{}, err
		}
		res.Subscriptions = int(loaded.Subscriptions)
		// Draw the same number of subscriptions as a load would, so the
		// comics measured are the same as after a load.
		for i := range res.Subscriptions {
			w.subscription(i)
		}
	} else {
		if err := rdb.Set(ctx, worldKey, cfg.World+" "+strconv.FormatUint(cfg.Seed, 10), 0).Err(); err != nil {
			return Result{}, fmt.Errorf("comicbench: record the world: %w", err)
		}
		if res.Subscriptions, err = load(ctx, svc.Subscriptions, w, cfg); err != nil {
			return Result{}, err
		}
	}
	res.Load = time.Since(began)
	st, err := svc.Subscriptions.Stats(ctx)
	if err != nil {
		return Result{}, err
	}
	res.ActivePattern = len(st.Patterns)
	res.RedisMemoryLoaded = benchstat.UsedMemory(ctx, rdb)
	cfg.Phases.Printf("%s world: %d subscriptions over %d patterns (loaded in %s); redis used_memory %d MB",
		cfg.World, res.Subscriptions, res.ActivePattern, res.Load.Round(time.Millisecond), res.RedisMemoryLoaded>>20)

	d, err := startDrain(ctx, rdb, svc)
	if err != nil {
		return Result{}, err
	}
	defer d.stop()
	if err := measureMatch(ctx, rdb, svc, w, cfg, &res, d); err != nil {
		return Result{}, err
	}
	if err := measureIntake(ctx, svc, w, cfg, &res); err != nil {
		return Result{}, err
	}
	if err := measureMatcher(ctx, rdb, svc, cfg, &res, d); err != nil {
		return Result{}, err
	}
	res.RedisMemory = benchstat.UsedMemory(ctx, rdb)
	return res, nil
}

// worldKey records the world and seed of the loaded subscriptions, so a
// run with Reuse measures comics of the same world.
const worldKey = rediskey.Prefix + "comicbench:world"

// checkLoadedWorld reports a Reuse run whose world or seed differs from the
// loaded one.
func checkLoadedWorld(ctx context.Context, rdb redis.UniversalClient, cfg Config) error {
	got, err := rdb.Get(ctx, worldKey).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("comicbench: loaded world: %w", err)
	}
	if want := cfg.World + " " + strconv.FormatUint(cfg.Seed, 10); got != want {
		return fmt.Errorf("comicbench: the loaded subscriptions are of world and seed %q, not %q", got, want)
	}
	return nil
}

// load creates cfg.Subscriptions subscriptions with LoadWorkers pipelines.
func load(ctx context.Context, store *comic.Store, w *world, cfg Config) (int, error) {
	const batch = 5000
	var created, done atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cfg.LoadWorkers)
	phase := cfg.Phases.Start("load subscriptions", int64(cfg.Subscriptions))
	for start := 0; start < cfg.Subscriptions && gctx.Err() == nil; start += batch {
		subs := make([]comic.NewSubscription, 0, batch)
		for i := start; i < min(start+batch, cfg.Subscriptions); i++ {
			subs = append(subs, w.subscription(i))
		}
		g.Go(func() error {
			n, err := store.CreateMany(gctx, subs)
			if err != nil {
				return err
			}
			created.Add(int64(n))
			done.Add(int64(len(subs)))
			return nil
		})
		phase.Set(done.Load())
	}
	err := cmp.Or(g.Wait(), ctx.Err())
	phase.Set(done.Load())
	phase.Done("")
	return int(created.Load()), err
}

// Bench is `dropstream bench comic`: Run over the app's Redis, its
// figures and how they compare with the flow's targets.
var Bench = flow.Bench{
	Name: "comic",
	Summary: "the comic flow: 1,000,000 subscriptions over SearchPatterns (--world wantlist, broad or ranges), match latency\n" +
		"(delivery not included), intake comics/s, matcher stage comics/s, Redis memory",
	Help: "Measures the comic flow against the configured Redis (a database without comic subscriptions).\n" +
		"The notification requests the matcher hands off are acknowledged by a discarding group and trimmed;\n" +
		"the run stops when Redis used_memory passes --max-redis-memory-mb.",
	Bind: bind,
}

// bind binds the target's flags and returns its run.
func bind(fs *flag.FlagSet) flow.BenchRun {
	var bc Config
	var maxMemMB int
	settings.BindFlags(fs, &bc)
	fs.IntVar(&maxMemMB, "max-redis-memory-mb", 4096, "stop when Redis used_memory passes this many MB")
	fs.StringVar(&bc.World, "world", WorldWantList, "data distribution: "+strings.Join(Worlds, ", ")+
		" (the first by default; see flows/comic/comicbench/world.go)")
	return flow.BenchRun{Run: func(ctx context.Context, env flow.BenchEnv) error {
		bc.MaxRedisMemory = int64(maxMemMB) << 20
		bc.Partitions = env.Settings.Partitions
		bc.Phases = env.Phases
		out := env.Stdout
		fmt.Fprintf(out, "bench comic: %s world (%s), %s, %d partitions, GOMAXPROCS %d\n", bc.World, WorldSummary[bc.World],
			env.RedisName, bc.Partitions, runtime.GOMAXPROCS(0))
		r, err := Run(ctx, env.Redis, bc)
		if err != nil {
			return err
		}
		printResult(out, bc, r)
		return nil
	}}
}

// printResult writes the figures of a run.
func printResult(out io.Writer, bc Config, r Result) {
	if bc.Reuse {
		fmt.Fprintf(out, "load: %d subscriptions over %d active patterns reused\n", r.Subscriptions, r.ActivePattern)
	} else {
		fmt.Fprintf(out, "load: %d subscriptions over %d active patterns in %s (%.0f/s)\n", r.Subscriptions, r.ActivePattern,
			r.Load.Round(time.Millisecond), float64(r.Subscriptions)/max(r.Load.Seconds(), 1e-9))
	}
	fmt.Fprintf(out, "subscriptions matched per comic: mean %.1f, p50 %d, p90 %d, p99 %d, max %d; examined (index entries read): mean %.1f, p99 %d, max %d\n",
		r.MeanMatched, r.MatchedP50, r.MatchedP90, r.MatchedP99, r.MaxMatched, r.MeanExamined, r.ExaminedP99, r.MaxExamined)
	fmt.Fprintf(out, "match, index lookups (MatchIDs): %s; cpu per comic %s + redis %s\n",
		r.Lookup.Round(time.Microsecond), micros(r.LookupCPU.Process), micros(r.LookupCPU.Redis))
	fmt.Fprintf(out, "match, whole job (lookups + pending notifications handed off, no delivery): %s; "+
		"cpu per comic %s + redis %s [target p99 ≤ 5ms: %s]\n",
		r.Job.Round(time.Microsecond), micros(r.JobCPU.Process), micros(r.JobCPU.Redis), flow.Verdict(r.Job.P99 <= 5*time.Millisecond))
	fmt.Fprintf(out, "intake: %.0f comics/s (%d workers, %d per call) [target ≥ 5000/s: %s]\n", r.IntakePerSecond, bc.Workers,
		bc.IntakeBatch, flow.Verdict(r.IntakePerSecond >= 5000))
	fmt.Fprintf(out, "matcher stage: %.0f comics/s (one copy; cpu per comic %s + redis %s, discarding group included), "+
		"%d notify messages handed off, notify streams peaked at %d entries\n",
		r.MatcherPerSecond, micros(r.MatcherCPU.Process), micros(r.MatcherCPU.Redis), r.Handed, r.NotifyPeak)
	fmt.Fprintf(out, "redis used_memory: %d MB after loading, %d MB at the end, %d MB at most\n",
		r.RedisMemoryLoaded>>20, r.RedisMemory>>20, r.PeakMemory>>20)
}

// micros prints a CPU time per item in µs whatever its size, so figures
// of loaded and quiet runs read alike.
func micros(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) + "µs" }
