package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/dropstream/dropstream/flows/comic/comicbench"
)

func init() {
	registerBench(benchTarget{"comic", "the comic flow: 1,000,000 subscriptions over realistic SearchPatterns, match latency\n" +
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
	fs.BoolVar(&bc.Reuse, "reuse", false, "measure over the subscriptions an earlier run loaded (no load)")
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
	redisKind := "redis " + redacted(cfg.RedisURL)
	if a.embedded != nil {
		redisKind = "embedded miniredis"
	}
	fmt.Fprintf(stdout, "bench comic: %s, %d partitions, GOMAXPROCS %d\n", redisKind, bc.Partitions, runtime.GOMAXPROCS(0))
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
	fmt.Fprintf(stdout, "subscribers per comic: mean %.1f, p50 %d, p90 %d, p99 %d, max %d\n",
		r.MeanMatched, r.MatchedP50, r.MatchedP90, r.MatchedP99, r.MaxMatched)
	fmt.Fprintf(stdout, "match (index lookups only): p50 %s, p99 %s\n", r.LookupP50.Round(time.Microsecond), r.LookupP99.Round(time.Microsecond))
	fmt.Fprintf(stdout, "match (lookups + subscribers, one per email): p50 %s, p99 %s, max %s [target p99 ≤ 5ms: %s]\n",
		r.MatchP50.Round(time.Microsecond), r.MatchP99.Round(time.Microsecond), r.MatchMax.Round(time.Microsecond),
		comicVerdict(r.MatchP99 <= 5*time.Millisecond))
	fmt.Fprintf(stdout, "intake: %.0f comics/s (%d workers, %d per call) [target ≥ 5000/s: %s]\n", r.IntakePerSecond, bc.Workers,
		bc.IntakeBatch, comicVerdict(r.IntakePerSecond >= 5000))
	fmt.Fprintf(stdout, "matcher stage: %.0f comics/s (one copy), %d notifications handed off, notify streams peaked at %d entries\n",
		r.MatcherPerSecond, r.Handed, r.NotifyPeak)
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
