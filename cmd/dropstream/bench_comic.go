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
		"(delivery not included), intake comics/s, matcher stage comics/s",
		func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			return runBenchComic(ctx, args, stdout, stderr)
		}})
}

// runBenchComic is `dropstream bench comic`.
func runBenchComic(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg Config
	var bc comicbench.Config
	fs := flagSet("bench comic", "Measures the comic flow against the configured Redis (a database without comic subscriptions).", stderr, &cfg, "json")
	fs.IntVar(&bc.Subscriptions, "subscriptions", 1_000_000, "subscriptions to load")
	fs.IntVar(&bc.Matches, "matches", 5000, "comics matched for the latency figures")
	fs.IntVar(&bc.Intake, "intake", 50_000, "comics listed for the intake figure")
	fs.IntVar(&bc.Workers, "workers", 16, "concurrent intake callers")
	fs.BoolVar(&bc.Reuse, "reuse", false, "measure over the subscriptions an earlier run loaded (no load)")
	if err := fs.parse(args); err != nil {
		return err
	}
	a, stop, err := benchApp(ctx, cfg, "", stderr)
	if err != nil {
		return err
	}
	defer stop()
	bc.Partitions = cfg.Partitions
	bc.Progress = func(line string) { fmt.Fprintln(stderr, "  ", line) }
	redisKind := "redis " + cfg.RedisURL
	if a.embedded != nil {
		redisKind = "embedded miniredis"
	}
	fmt.Fprintf(stdout, "bench comic: %s, %d partitions, GOMAXPROCS %d\n", redisKind, bc.Partitions, runtime.GOMAXPROCS(0))
	r, err := comicbench.Run(ctx, a.rdb, bc)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "load: %d subscriptions over %d active patterns in %s\n", r.Subscriptions, r.ActivePattern, r.Load.Round(time.Millisecond))
	fmt.Fprintf(stdout, "match (index lookups only): p50 %s, p99 %s\n", r.LookupP50.Round(time.Microsecond), r.LookupP99.Round(time.Microsecond))
	fmt.Fprintf(stdout, "match (lookups + subscribers, one per email): p50 %s, p99 %s, max %s; %.1f subscribers per comic on average, %d at most\n",
		r.MatchP50.Round(time.Microsecond), r.MatchP99.Round(time.Microsecond), r.MatchMax.Round(time.Microsecond), r.MeanMatched, r.MaxMatched)
	fmt.Fprintf(stdout, "intake: %.0f comics/s (%d workers)\n", r.IntakePerSecond, bc.Workers)
	fmt.Fprintf(stdout, "matcher stage: %.0f comics/s (one copy)\n", r.MatcherPerSecond)
	fmt.Fprintf(stdout, "redis used_memory: %d MB\n", r.RedisMemory>>20)
	return nil
}
