package checkoutbench

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"time"

	"github.com/dropstream/dropstream/flow"
)

// Bench is `dropstream bench checkout`: Run over the app's Redis, with the
// contract served on a loopback port and the stages in this process.
var Bench = flow.Bench{
	Name: "checkout",
	Summary: "the checkout saga over its HTTP contract: batch_init 100k items, users and orders,\n" +
		"random checkouts: checkouts/s, p50/p99 latency at a fixed rate, and a consistency check",
	Help: "Measures the checkout saga over HTTP against the configured Redis (use a database\n" +
		"without other checkout data): the contract is served on a loopback port, the stages run in this process.",
	Bind: bind,
}

// bind binds the target's flags and returns its run.
func bind(fs *flag.FlagSet) flow.BenchRun {
	var bc Config
	fs.IntVar(&bc.Items, "items", 100_000, "items of the batch_init")
	fs.IntVar(&bc.Users, "users", 100_000, "users of the batch_init")
	fs.IntVar(&bc.Orders, "orders", 100_000, "orders of the batch_init (two random items each)")
	fs.Int64Var(&bc.Stock, "stock", 1_000_000, "starting stock of every item")
	fs.Int64Var(&bc.Credit, "credit", 1_000_000, "starting credit of every user")
	fs.IntVar(&bc.Clients, "clients", 64, "concurrent clients of the throughput run")
	fs.DurationVar(&bc.Duration, "duration", 10*time.Second, "length of the throughput run")
	fs.IntVar(&bc.Rate, "rate", TargetRate, "checkouts/s of the latency run")
	fs.DurationVar(&bc.LatencyDuration, "latency-duration", 10*time.Second, "length of the latency run")
	fs.IntVar(&bc.Copies, "copies", 1, "copies of each stage")
	return flow.BenchRun{Run: func(ctx context.Context, env flow.BenchEnv) error {
		bc.Partitions = env.Settings.Partitions
		bc = bc.WithDefaults()
		if err := bc.Validate(); err != nil {
			return err
		}
		bc.Telemetry = env.Telemetry
		bc.Progress = env.Progress
		out := env.Stdout
		fmt.Fprintf(out, "bench checkout: %s, %d items, %d users, %d orders, %d partitions, %d copies per stage, GOMAXPROCS %d\n",
			env.RedisName, bc.Items, bc.Users, bc.Orders, bc.Partitions, bc.Copies, runtime.GOMAXPROCS(0))
		res, err := Run(ctx, env.Redis, env.Publisher, bc)
		if err != nil {
			return err
		}
		t, l := res.Throughput, res.Latency
		fmt.Fprintf(out, "setup: batch_init in %s\n", res.Setup.Round(time.Millisecond))
		fmt.Fprintf(out, "(a) throughput, %d clients: %d checkouts (%d ok, %d failed, %d errors) in %s = %.0f/s, p50 %s, p99 %s [target ≥ %d/s: %s]\n",
			bc.Clients, t.Checkouts, t.OK, t.Failed, t.Errors, t.Elapsed.Round(time.Millisecond), t.PerSecond(),
			t.P50.Round(10*time.Microsecond), t.P99.Round(10*time.Microsecond), TargetCheckoutsPerSecond,
			flow.Verdict(t.PerSecond() >= TargetCheckoutsPerSecond))
		fmt.Fprintf(out, "(b) latency at %d/s: %d checkouts (%d ok, %d failed, %d errors), p50 %s, p99 %s, max %s [target p99 ≤ %dms: %s]\n",
			bc.Rate, l.Checkouts, l.OK, l.Failed, l.Errors, l.P50.Round(10*time.Microsecond), l.P99.Round(10*time.Microsecond),
			l.Max.Round(10*time.Microsecond), TargetP99Millis, flow.Verdict(l.P99 <= TargetP99Millis*time.Millisecond))
		fmt.Fprintf(out, "(c) consistency: %d orders checked, %d inconsistencies [target 0: %s]\n",
			res.Checked, len(res.Inconsistencies), flow.Verdict(len(res.Inconsistencies) == 0))
		for _, s := range res.Inconsistencies {
			fmt.Fprintln(out, "   ", s)
		}
		return nil
	}}
}
