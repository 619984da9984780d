package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/dropstream/dropstream/flows/offer/offerbench"
)

func init() {
	registerBench(benchTarget{"offers", "sell-offer search (issue 9): offers over 3 handlers, searches that miss (fan-out to\n" +
		"every handler stage and back) and searches served from the logical result cache",
		func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			return runBenchOffers(ctx, append([]string{"offers"}, args...), stdout, stderr)
		}})
}

// runBenchOffers is `dropstream bench offers`.
func runBenchOffers(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg Config
	var bc offerbench.Config
	fs := flagSet("bench offers", "Measures the sell-offer search against the configured Redis (an empty database):\n"+
		"p50/p99 of searches that miss and fan out to every handler, and of cached hits.", stderr, &cfg, "json")
	fs.IntVar(&bc.Offers, "offers", 100000, "offers, round robin over the 3 handlers")
	fs.IntVar(&bc.Products, "products", 2000, "products the offers are spread over")
	fs.IntVar(&bc.Misses, "misses", 200, "distinct searches (each a miss)")
	fs.IntVar(&bc.Hits, "hits", 5000, "cached searches")
	fs.IntVar(&bc.Broad, "broad", 20, "misses without a product element (every offer priced)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the bench to this file")
	if err := fs.parse(args[1:]); err != nil {
		return err
	}
	a, stop, err := benchApp(ctx, cfg, *cpuProfile, stderr)
	if err != nil {
		return err
	}
	defer stop()
	bc.Partitions, bc.Telemetry = cfg.Partitions, a.tel
	bc.Progress = func(line string) { fmt.Fprintln(stderr, "  ", line) }
	redisKind := "redis " + redacted(cfg.RedisURL)
	if a.embedded != nil {
		redisKind = "embedded miniredis"
	}
	fmt.Fprintf(stdout, "bench offers: %s, %d offers over 3 handlers, %d partitions, GOMAXPROCS %d\n",
		redisKind, bc.Offers, cfg.Partitions, runtime.GOMAXPROCS(0))
	r, err := offerbench.Run(ctx, a.rdb, bc)
	if err != nil {
		return err
	}
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	us := func(d time.Duration) string { return d.Round(10 * time.Microsecond).String() }
	fmt.Fprintf(stdout, "seed: %s; handler views loaded in %s; first search: %s\n", r.Seed.Round(time.Millisecond),
		r.Warm.Round(time.Millisecond), r.First.Round(time.Millisecond))
	fmt.Fprintf(stdout, "miss with fan-out: %d searches, %.1f matches each, p50 %s, p99 %s, max %s [target p99 ≤ %s: %s]\n",
		r.Miss.Count, r.Miss.Matches, us(r.Miss.P50), us(r.Miss.P99), us(r.Miss.Max), offerbench.TargetMissP99, verdict(r.Miss.P99 <= offerbench.TargetMissP99))
	if r.Broad.Count > 0 {
		fmt.Fprintf(stdout, "broad miss (every offer priced): %d searches, %.1f matches each, p50 %s, p99 %s, max %s\n",
			r.Broad.Count, r.Broad.Matches, us(r.Broad.P50), us(r.Broad.P99), us(r.Broad.Max))
	}
	fmt.Fprintf(stdout, "cached hit: %d searches, p50 %s, p99 %s, max %s [target p99 ≤ %s: %s]\n",
		r.Hit.Count, us(r.Hit.P50), us(r.Hit.P99), us(r.Hit.Max), offerbench.TargetHitP99, verdict(r.Hit.P99 <= offerbench.TargetHitP99))
	return nil
}
