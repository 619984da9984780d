package feedbench

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"time"

	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/internal/settings"
)

// Bench is `dropstream bench feed`: Run over the app's Redis.
var Bench = flow.Bench{
	Name: "feed",
	Summary: "the feed flow end to end: 10k feeds of 50 items from a feed server in another process, each\n" +
		"polled once through poll, assign, digests and delivery: items/s, CPU per item, Redis bytes per feed",
	Help: "Measures the feed flow against the configured Redis (an empty database): every feed polled once\n" +
		"through the whole flow, its feeds served by a process of its own so its CPU is not in the figure.",
	Bind: bind,
}

// bind binds the target's flags and returns its run.
func bind(fs *flag.FlagSet) flow.BenchRun {
	var bc Config
	settings.BindFlags(fs, &bc)
	return flow.BenchRun{Run: func(ctx context.Context, env flow.BenchEnv) error {
		bc.Partitions, bc.Self, bc.Telemetry, bc.Progress = env.Settings.Partitions, env.Self, env.Telemetry, env.Phases
		settings.Defaults(&bc)
		server := "a feed server in another process"
		if bc.Self == nil {
			server = "a feed server in this process: its CPU is in the process's figure"
		}
		out := env.Stdout
		fmt.Fprintf(out, "bench feed: %s, %d feeds of %d items from %s, %d pollers, %d copies per stage, %d partitions, GOMAXPROCS %d\n",
			env.RedisName, bc.Feeds, itemsPerFeed, server, bc.Pollers, bc.Copies, bc.Partitions, runtime.GOMAXPROCS(0))
		r, err := Run(ctx, env.Redis, bc)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "items: %d through the flow in %s = %.0f items/s; polls published %.0f/s\n", r.Items,
			r.Elapsed.Round(time.Millisecond), float64(r.Items)/r.Elapsed.Seconds(), float64(bc.Feeds)/r.Polled.Seconds())
		fmt.Fprintf(out, "cpu per item: %s (polls, parse and stages)\n", r.CPU)
		fmt.Fprintf(out, "Redis bytes per feed: %d definitions, %d with the run's stream entries, %d once they are trimmed\n",
			r.Definitions, r.Streams, r.State)
		return nil
	}}
}
