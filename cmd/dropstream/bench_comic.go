package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"

	"github.com/dropstream/dropstream/flows/comic/comicbench"
)

func init() {
	registerBench(benchTarget{"comic", "the comic flow: 1,000,000 subscriptions over SearchPatterns (--world wantlist or broad), match latency\n" +
		"(delivery not included), intake comics/s, matcher stage comics/s, Redis memory",
		func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			return runBenchComic(ctx, args, stdout, stderr)
		}})
}

// runBenchComic is `dropstream bench comic`.
func runBenchComic(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg Config
	var bc comicbench.Config
	var maxMemMB int
	fs := flagSet("bench comic", "Measures the comic flow against the configured Redis (a database without comic subscriptions).\n"+
		"The notification requests the matcher hands off are acknowledged by a discarding group and trimmed;\n"+
		"the run stops when Redis used_memory passes --max-redis-memory-mb.", stderr, &cfg, "json")
	fs.IntVar(&bc.Subscriptions, "subscriptions", 1_000_000, "subscriptions to load")
	fs.IntVar(&bc.LoadWorkers, "load-workers", 4, "concurrent pipelines loading the subscriptions")
	fs.IntVar(&bc.Matches, "matches", 5000, "comics matched for the latency figures")
	fs.IntVar(&bc.Intake, "intake", 50_000, "comics listed for the intake figure")
	fs.IntVar(&bc.Workers, "workers", 16, "concurrent intake callers")
	fs.IntVar(&bc.IntakeBatch, "intake-batch", 1, "comics per intake call (1: one script per call as POST /v1/comics; more: one pipeline of scripts)")
	fs.IntVar(&maxMemMB, "max-redis-memory-mb", 4096, "stop when Redis used_memory passes this many MB")
	fs.StringVar(&bc.World, "world", comicbench.WorldWantList, "data distribution: "+strings.Join(comicbench.Worlds, " (default) or ")+
		" (see flows/comic/comicbench/world.go)")
	fs.BoolVar(&bc.Reuse, "reuse", false, "measure over the subscriptions an earlier run loaded with the same --world (no load)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file")
	if err := fs.parse(args); err != nil {
		return err
	}
	bc.MaxRedisMemory = int64(maxMemMB) << 20
	a, stop, err := benchApp(ctx, cfg, *cpuProfile, stderr)
	if err != nil {
		return err
	}
	defer stop()
	bc.Partitions = cfg.Partitions
	bc.Progress = func(line string) { fmt.Fprintln(stderr, "  ", line) }
	bc.CPU = func() (time.Duration, time.Duration) { return processCPU(), redisCPU(ctx, a) }
	redisKind := "redis " + redacted(cfg.RedisURL)
	if a.embedded != nil {
		redisKind = "embedded miniredis"
	}
	fmt.Fprintf(stdout, "bench comic: %s world, %s, %d partitions, GOMAXPROCS %d\n", bc.World, redisKind, bc.Partitions, runtime.GOMAXPROCS(0))
	r, err := comicbench.Run(ctx, a.rdb, bc)
	if err != nil {
		return err
	}
	if bc.Reuse {
		fmt.Fprintf(stdout, "load: %d subscriptions over %d active patterns reused\n", r.Subscriptions, r.ActivePattern)
	} else {
		fmt.Fprintf(stdout, "load: %d subscriptions over %d active patterns in %s (%.0f/s)\n", r.Subscriptions, r.ActivePattern,
			r.Load.Round(time.Millisecond), float64(r.Subscriptions)/max(r.Load.Seconds(), 1e-9))
	}
	fmt.Fprintf(stdout, "subscriptions matched per comic: mean %.1f, p50 %d, p90 %d, p99 %d, max %d\n",
		r.MeanMatched, r.MatchedP50, r.MatchedP90, r.MatchedP99, r.MaxMatched)
	fmt.Fprintf(stdout, "match, index lookups (MatchIDs): p50 %s, p99 %s, max %s; cpu per comic %s + redis %s\n",
		r.LookupP50.Round(time.Microsecond), r.LookupP99.Round(time.Microsecond), r.LookupMax.Round(time.Microsecond),
		r.LookupCPU.Process.Round(time.Microsecond), r.LookupCPU.Redis.Round(time.Microsecond))
	fmt.Fprintf(stdout, "match, whole job (lookups + pending notifications handed off, no delivery): p50 %s, p99 %s, max %s; "+
		"cpu per comic %s + redis %s [target p99 ≤ 5ms: %s]\n",
		r.JobP50.Round(time.Microsecond), r.JobP99.Round(time.Microsecond), r.JobMax.Round(time.Microsecond),
		r.JobCPU.Process.Round(time.Microsecond), r.JobCPU.Redis.Round(time.Microsecond), comicVerdict(r.JobP99 <= 5*time.Millisecond))
	fmt.Fprintf(stdout, "intake: %.0f comics/s (%d workers, %d per call) [target ≥ 5000/s: %s]\n", r.IntakePerSecond, bc.Workers,
		bc.IntakeBatch, comicVerdict(r.IntakePerSecond >= 5000))
	fmt.Fprintf(stdout, "matcher stage: %.0f comics/s (one copy; cpu per comic %s + redis %s, discarding group included), "+
		"%d notify messages handed off, notify streams peaked at %d entries\n",
		r.MatcherPerSecond, r.MatcherCPU.Process.Round(time.Microsecond), r.MatcherCPU.Redis.Round(time.Microsecond), r.Handed, r.NotifyPeak)
	fmt.Fprintf(stdout, "redis used_memory: %d MB after loading, %d MB at the end, %d MB at most\n",
		r.RedisMemoryLoaded>>20, r.RedisMemory>>20, r.PeakMemory>>20)
	return nil
}

func comicVerdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}
