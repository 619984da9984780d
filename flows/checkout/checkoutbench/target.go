package checkoutbench

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"

	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/internal/settings"
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
	settings.BindFlags(fs, &bc)
	limiter := fs.String("limiter", "on", "the API's rate limiter in each run, in order: on (the binary's, as --api-limits sets it), "+
		"off, or a list (on,off runs both in one invocation and prints the throughput ratio on/off)")
	return flow.BenchRun{Run: func(ctx context.Context, env flow.BenchEnv) error {
		modes, err := limiterModes(*limiter)
		if err != nil {
			return err
		}
		bc.Partitions = env.Settings.Partitions
		bc.Wait = env.Settings.RedisWait
		if err := settings.Prepare("checkoutbench", &bc); err != nil {
			return err
		}
		bc.Telemetry, bc.Progress, bc.Self = env.Telemetry, env.Phases, env.Self
		out := env.Stdout
		fmt.Fprintf(out, "bench checkout: %s, %d items, %d users, %d orders, %d partitions, %d copies per stage, replica wait %s, GOMAXPROCS %d\n",
			env.RedisName, bc.Items, bc.Users, bc.Orders, bc.Partitions, bc.Copies, bc.Wait, runtime.GOMAXPROCS(0))
		perSecond := map[string][]float64{}
		for _, mode := range modes {
			bc.RateLimit = env.RateLimit
			bc.RateLimit.Disabled = env.RateLimit.Disabled || mode == "off"
			fmt.Fprintf(out, "[limiter %s: %s]\n", mode, cmp.Or(bc.RateLimit.String(), "the defaults"))
			res, err := Run(ctx, env.Redis, env.Publisher, bc)
			if err != nil {
				return err
			}
			report(out, bc, res)
			perSecond[mode] = append(perSecond[mode], res.Throughput.PerSecond())
		}
		if on, off := perSecond["on"], perSecond["off"]; len(on) > 0 && len(off) > 0 {
			ratio := mean(on) / mean(off)
			fmt.Fprintf(out, "limiter on / off: %.0f/s / %.0f/s = %.2f [target ≥ %.1f: %s]\n",
				mean(on), mean(off), ratio, TargetLimiterRatio, flow.Verdict(ratio >= TargetLimiterRatio))
		}
		return nil
	}}
}

// TargetLimiterRatio is the least throughput of the checkout bench with
// the default limiter on, as a share of the same bench with it off.
const TargetLimiterRatio = 0.9

// limiterModes parses --limiter: a comma list of on and off.
func limiterModes(s string) ([]string, error) {
	var modes []string
	for _, m := range strings.Split(s, ",") {
		m = strings.TrimSpace(m)
		if m != "on" && m != "off" {
			return nil, fmt.Errorf("checkoutbench: --limiter %q: want on, off or a comma list of them", s)
		}
		modes = append(modes, m)
	}
	if len(modes) > 10 {
		return nil, fmt.Errorf("checkoutbench: --limiter: at most 10 runs")
	}
	return modes, nil
}

func mean(xs []float64) float64 {
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// report prints the figures of one run.
func report(out io.Writer, bc Config, res Result) {
	t, l := res.Throughput, res.Latency
	fmt.Fprintf(out, "setup: batch_init in %s\n", res.Setup.Round(time.Millisecond))
	fmt.Fprintf(out, "(a) throughput, %d clients: %d checkouts (%d ok, %d failed, %d errors) in %s = %.0f/s, p50 %s, p99 %s [target ≥ %d/s: %s]\n",
		bc.Clients, t.Checkouts, t.OK, t.Failed, t.Errors, t.Elapsed.Round(time.Millisecond), t.PerSecond(),
		t.P50.Round(10*time.Microsecond), t.P99.Round(10*time.Microsecond), TargetCheckoutsPerSecond,
		flow.Verdict(t.PerSecond() >= TargetCheckoutsPerSecond))
	fmt.Fprintf(out, "    cpu per checkout: %s (this process runs the stages and the API; the bench's HTTP clients run in another process)\n", t.CPU)
	fmt.Fprintf(out, "(b) latency at %d/s: %d checkouts (%d ok, %d failed, %d errors), %s [target p99 ≤ %dms: %s]\n",
		bc.Rate, l.Checkouts, l.OK, l.Failed, l.Errors, l.Latencies.Round(10*time.Microsecond), TargetP99Millis, flow.Verdict(l.P99 <= TargetP99Millis*time.Millisecond))
	fmt.Fprintf(out, "    cpu per checkout: %s\n", l.CPU)
	fmt.Fprintf(out, "(c) consistency: %d orders checked, %d inconsistencies [target 0: %s]\n",
		res.Checked, len(res.Inconsistencies), flow.Verdict(len(res.Inconsistencies) == 0))
	for _, s := range res.Inconsistencies {
		fmt.Fprintln(out, "   ", s)
	}
}
