package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/dropstream/dropstream/flows/checkout/checkoutbench"
)

func init() {
	registerBench(benchTarget{name: "checkout", summary: "the checkout saga over its HTTP contract: batch_init 100k items, users and orders,\n" +
		"random checkouts: checkouts/s, p50/p99 latency at a fixed rate, and a consistency check",
		run: runBenchCheckout})
}

// runBenchCheckout is `dropstream bench checkout`.
func runBenchCheckout(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg Config
	var bc checkoutbench.Config
	fs := flagSet("bench checkout", "Measures the checkout saga over HTTP against the configured Redis (use a database\n"+
		"without other checkout data): the contract is served on a loopback port, the stages run in this process.", stderr, &cfg, "json")
	fs.IntVar(&bc.Items, "items", 100_000, "items of the batch_init")
	fs.IntVar(&bc.Users, "users", 100_000, "users of the batch_init")
	fs.IntVar(&bc.Orders, "orders", 100_000, "orders of the batch_init (two random items each)")
	fs.Int64Var(&bc.Stock, "stock", 1_000_000, "starting stock of every item")
	fs.Int64Var(&bc.Credit, "credit", 1_000_000, "starting credit of every user")
	fs.IntVar(&bc.Clients, "clients", 64, "concurrent clients of the throughput run")
	fs.DurationVar(&bc.Duration, "duration", 10*time.Second, "length of the throughput run")
	fs.IntVar(&bc.Rate, "rate", checkoutbench.TargetRate, "checkouts/s of the latency run")
	fs.DurationVar(&bc.LatencyDuration, "latency-duration", 10*time.Second, "length of the latency run")
	fs.IntVar(&bc.Copies, "copies", 1, "copies of each stage")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the bench to this file")
	if err := fs.parse(args); err != nil {
		return err
	}
	bc.Partitions = cfg.Partitions
	bc = bc.WithDefaults()
	if err := bc.Validate(); err != nil {
		return err
	}
	a, stop, err := benchApp(ctx, cfg, *cpuProfile, stderr)
	if err != nil {
		return err
	}
	defer stop()
	bc.Telemetry = a.tel
	bc.Progress = func(line string) { fmt.Fprintln(stderr, "  ", line) }
	redisKind := "redis " + redacted(cfg.RedisURL)
	if a.embedded != nil {
		redisKind = "embedded miniredis"
	}
	fmt.Fprintf(stdout, "bench checkout: %s, %d items, %d users, %d orders, %d partitions, %d copies per stage, GOMAXPROCS %d\n",
		redisKind, bc.Items, bc.Users, bc.Orders, bc.Partitions, bc.Copies, runtime.GOMAXPROCS(0))
	res, err := checkoutbench.Run(ctx, a.rdb, a.pub, bc)
	if err != nil {
		return err
	}
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	t, l := res.Throughput, res.Latency
	fmt.Fprintf(stdout, "setup: batch_init in %s\n", res.Setup.Round(time.Millisecond))
	fmt.Fprintf(stdout, "(a) throughput, %d clients: %d checkouts (%d ok, %d failed, %d errors) in %s = %.0f/s, p50 %s, p99 %s [target ≥ %d/s: %s]\n",
		bc.Clients, t.Checkouts, t.OK, t.Failed, t.Errors, t.Elapsed.Round(time.Millisecond), t.PerSecond(),
		t.P50.Round(10*time.Microsecond), t.P99.Round(10*time.Microsecond), checkoutbench.TargetCheckoutsPerSecond,
		verdict(t.PerSecond() >= checkoutbench.TargetCheckoutsPerSecond))
	fmt.Fprintf(stdout, "(b) latency at %d/s: %d checkouts (%d ok, %d failed, %d errors), p50 %s, p99 %s, max %s [target p99 ≤ %dms: %s]\n",
		bc.Rate, l.Checkouts, l.OK, l.Failed, l.Errors, l.P50.Round(10*time.Microsecond), l.P99.Round(10*time.Microsecond),
		l.Max.Round(10*time.Microsecond), checkoutbench.TargetP99Millis, verdict(l.P99 <= checkoutbench.TargetP99Millis*time.Millisecond))
	fmt.Fprintf(stdout, "(c) consistency: %d orders checked, %d inconsistencies [target 0: %s]\n",
		res.Checked, len(res.Inconsistencies), verdict(len(res.Inconsistencies) == 0))
	for _, s := range res.Inconsistencies {
		fmt.Fprintln(stdout, "   ", s)
	}
	return nil
}
