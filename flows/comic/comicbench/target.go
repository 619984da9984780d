package comicbench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/internal/settings"
)

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
