package offerbench

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"time"

	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/flows/offer"
	"github.com/dropstream/dropstream/internal/benchstat"
	"github.com/dropstream/dropstream/internal/settings"
	"github.com/dropstream/dropstream/stream"
)

// Bench is `dropstream bench offers`: Run over the app's Redis, its
// figures and how they compare with the targets.
var Bench = flow.Bench{
	Name: "offers",
	Summary: "sell-offer search: offers over 3 handlers, searches that miss (fan-out to\n" +
		"every handler stage and back) and searches served from the logical result cache",
	Help: "Measures the sell-offer search against the configured Redis (an empty database):\n" +
		"p50/p99 of searches that miss and fan out to every handler, and of cached hits.",
	Bind: bind,
}

// bind binds the target's flags and returns its run.
func bind(fs *flag.FlagSet) flow.BenchRun {
	var bc Config
	settings.BindFlags(fs, &bc)
	fs.IntVar(&bc.Broad, "broad", 20, "misses without a product element (every offer priced)")
	perHandler := fs.Bool("per-handler", true, "then run the misses again with one handler holding its share of the offers, "+
		"to print what each handler adds to a miss (empties the database between the runs)")
	return flow.BenchRun{Run: func(ctx context.Context, env flow.BenchEnv) error {
		bc.Partitions, bc.Telemetry = env.Settings.Partitions, env.Telemetry
		bc.Progress = env.Phases
		out, def := env.Stdout, offer.Config{}.WithDefaults()
		fmt.Fprintf(out, "bench offers: %s, %d offers over 3 handlers, %d partitions, GOMAXPROCS %d; "+
			"searches are called in this process with no client apart, so its CPU is the flow's; "+
			"changed from the flow's defaults: max wait %s (%s), result ttl %s (%s), handler read block %s (%s)\n",
			env.RedisName, bc.Offers, bc.Partitions, runtime.GOMAXPROCS(0), maxWait, def.MaxWait, resultTTL, def.ResultTTL,
			readBlock, stream.RunnerConfig{}.WithDefaults("").Block)
		r, err := Run(ctx, env.Redis, bc)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "seed: %s; handler views loaded in %s; first search: %s\n", r.Seed.Round(time.Millisecond),
			r.Warm.Round(time.Millisecond), r.First.Round(time.Millisecond))
		fmt.Fprintf(out, "miss with fan-out: %d searches, %.1f matches each, %s; cpu per search %s [target p99 ≤ %s: %s]\n",
			r.Miss.Count, r.Miss.Matches, r.Miss.Latencies.Round(10*time.Microsecond), r.Miss.CPU, TargetMissP99, flow.Verdict(r.Miss.P99 <= TargetMissP99))
		if r.Broad.Count > 0 {
			fmt.Fprintf(out, "broad miss (every offer priced): %d searches, %.1f matches each, %s; cpu per search %s\n",
				r.Broad.Count, r.Broad.Matches, r.Broad.Latencies.Round(10*time.Microsecond), r.Broad.CPU)
		}
		fmt.Fprintf(out, "cached hit: %d searches, %s; cpu per search %s [target p99 ≤ %s: %s]\n",
			r.Hit.Count, r.Hit.Latencies.Round(10*time.Microsecond), r.Hit.CPU, TargetHitP99, flow.Verdict(r.Hit.P99 <= TargetHitP99))
		if !*perHandler {
			return nil
		}
		return fanOut(ctx, env, bc, r.Miss)
	}}
}

// fanOut empties the database, runs the misses with the first handler
// alone holding its share of the offers, and prints what each further
// handler adds to a miss: (CPU with all − CPU with one) / (handlers − 1).
func fanOut(ctx context.Context, env flow.BenchEnv, bc Config, all Latencies) error {
	settings.Defaults(&bc)
	handlers := offer.DefaultHandlers
	if len(bc.Handlers) > 0 {
		handlers = bc.Handlers
	}
	if len(handlers) < 2 {
		return nil
	}
	if err := benchstat.FlushDB(ctx, env.Redis); err != nil {
		return err
	}
	one := bc
	one.Handlers, one.Offers, one.Hits, one.Broad = handlers[:1], max(1, bc.Offers/len(handlers)), 1, 0
	one.Progress = bc.Progress.With("one handler: ")
	r, err := Run(ctx, env.Redis, one)
	if err != nil {
		return err
	}
	per := all.CPU.PerItem(r.Miss.CPU, len(handlers)-1)
	fmt.Fprintf(env.Stdout, "fan-out per handler: a miss with the %s handler alone (%d offers, its share) costs %s; with all %d, %s: "+
		"each handler beyond the first adds %s (its message, read, pricing of its share and reply)\n",
		handlers[0].Tag, one.Offers, r.Miss.CPU, len(handlers), all.CPU, per)
	return nil
}
