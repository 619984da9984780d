package availbench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/internal/benchstat"
	"github.com/dropstream/dropstream/internal/settings"
)

// Bench is the `dropstream bench availability` target.
var Bench = flow.Bench{
	Name: "availability",
	Summary: "the availability pipeline on real Redis and ClickHouse: observations/s through diff,\n" +
		"transitions/s into ClickHouse, end-to-end latency to a webhook, Redis memory per entity",
	Help: "Measures the availability pipeline against the configured Redis (an empty database)\n" +
		"and ClickHouse (in a database of its own): observations/s through diff, transitions/s into\n" +
		"ClickHouse, end-to-end latency from observation to webhook, Redis memory per entity.",
	Bind: bind,
}

func bind(fs *flag.FlagSet) flow.BenchRun {
	var bc Config
	settings.BindFlags(fs, &bc)
	var release bool
	var rc ReleaseConfig
	fs.BoolVar(&release, "release", false, "instead: release → webhook latency on the simulator with daily releases, at the fixed interval, then with learned release times (Redis only)")
	settings.BindFlags(fs, &rc)
	return flow.BenchRun{
		Check: func(env flow.BenchEnv) error {
			if release {
				if env.RedisURL == "" {
					return errors.New("bench availability --release needs a real Redis: set --redis-url")
				}
				rc = rc.WithDefaults()
				return rc.Validate()
			}
			if env.RedisURL == "" || env.ClickHouseDSN == "" {
				return errors.New("bench availability needs a real Redis and ClickHouse: set --redis-url and --clickhouse-dsn")
			}
			bc.ClickHouseDSN, bc.Partitions = env.ClickHouseDSN, env.Settings.Partitions
			bc = bc.WithDefaults()
			return bc.Validate()
		},
		Run: func(ctx context.Context, env flow.BenchEnv) error {
			if release {
				rc.Telemetry, rc.Phases = env.Telemetry, env.Phases
				fmt.Fprintf(env.Stdout, "bench availability --release: %s, %d venues, interval %s, burst %s, k %d, virtual clock ×%g, GOMAXPROCS %d\n",
					env.RedisName, rc.Venues, rc.Interval, rc.Burst, rc.Stabilization, rc.Scale, runtime.GOMAXPROCS(0))
				res, err := RunRelease(ctx, env.Redis, rc)
				if err != nil {
					return err
				}
				PrintRelease(env.Stdout, rc, res)
				return nil
			}
			bc.Telemetry, bc.Phases = env.Telemetry, env.Phases
			fmt.Fprintf(env.Stdout, "bench availability: %s, %d scopes × %d entities = %d, churn %g, %d runs, %d partitions, GOMAXPROCS %d\n",
				env.RedisName, bc.Scopes, bc.PerScope, bc.Scopes*bc.PerScope, bc.Churn, bc.Runs, bc.Partitions, runtime.GOMAXPROCS(0))
			res, err := Run(ctx, env.Redis, bc)
			if err != nil {
				return err
			}
			Print(env.Stdout, bc, res)
			return nil
		},
	}
}

// Print writes the bench's figures and how they compare with the targets.
func Print(w io.Writer, bc Config, r Result) {
	rate := func(x Rate) string {
		return fmt.Sprintf("%d in %s = %.0f/s", x.Count, x.Elapsed.Round(time.Millisecond), x.PerSecond())
	}
	fmt.Fprintf(w, "setup: baseline run %s observations, stabilization run %s observations\n", rate(r.Baseline), rate(r.Stabilization))
	cpu := func(x Rate, item string) string {
		per := x.CPU.Per(int(x.Count))
		return fmt.Sprintf("CPU per %s: bench process %.2f µs, Redis %.2f µs", item, benchstat.Micros(per.Process), benchstat.Micros(per.Redis))
	}
	fmt.Fprintf(w, "(a) diff: %s observations (%d churn runs); %s [target ≥ %d/s: %s]\n", rate(r.Diff), bc.Runs,
		cpu(r.Diff, "observation"), TargetObservationsPerSecond, flow.Verdict(r.Diff.PerSecond() >= TargetObservationsPerSecond))
	fmt.Fprintf(w, "(b) clickhouse: %s transitions; %s [target ≥ %d/s: %s]\n", rate(r.Analytics),
		cpu(r.Analytics, "transition"), TargetTransitionsPerSecond, flow.Verdict(r.Analytics.PerSecond() >= TargetTransitionsPerSecond))
	l := r.Latency
	fmt.Fprintf(w, "(c) end to end at %d observations/s for %s: %d of %d notifications, %d duplicates, %s [target p99 ≤ %dms: %s]\n",
		l.Rate, l.Elapsed.Round(time.Millisecond), l.Received, l.Expected, l.Duplicates, l.Latencies.Round(10*time.Microsecond), TargetP99Millis,
		flow.Verdict(l.Received == l.Expected && l.P99 <= TargetP99Millis*time.Millisecond))
	fmt.Fprintf(w, "(d) redis memory: %.1f bytes/entity after the baseline run (%d bytes for %d entities), %.1f after stabilization [target ≤ %d: %s]\n",
		r.MemoryAfterBaseline.PerEntity(), r.MemoryAfterBaseline.Bytes, r.MemoryAfterBaseline.Entities, r.MemorySteady.PerEntity(),
		TargetBytesPerEntity, flow.Verdict(r.MemoryAfterBaseline.PerEntity() <= TargetBytesPerEntity))
}

// PrintRelease writes the release bench's figures.
func PrintRelease(w io.Writer, rc ReleaseConfig, r ReleaseResult) {
	line := func(name string, l ReleaseLatency) {
		fmt.Fprintf(w, "%s: %d of %d notices, release → webhook %s, %d polls\n", name, l.Received, l.Expected,
			l.Latencies.Round(100*time.Millisecond), l.Polls)
	}
	line(fmt.Sprintf("fixed interval %s (%d days)", rc.Interval, rc.HistoryDays), r.Fixed)
	line(fmt.Sprintf("learned, bursts every %s (%d days)", rc.Burst, rc.LearnedDays), r.Learned)
	fmt.Fprintf(w, "learned peaks of the first venue: %+v\n", r.Peaks)
}

// Targets of the availability pipeline on a 2-core machine.
const (
	TargetObservationsPerSecond = 200_000
	TargetTransitionsPerSecond  = 100_000
	TargetP99Millis             = 50
	TargetBytesPerEntity        = 250
)

// Result is what Run measured.
type Result struct {
	// Entities is Scopes × PerScope.
	Entities int
	// Database is the ClickHouse database the bench wrote to.
	Database string
	// Baseline and Stabilization are the setup runs through the diff stage.
	Baseline, Stabilization Rate
	// MemoryAfterBaseline is Redis memory after the baseline run,
	// MemorySteady after the stabilization run.
	MemoryAfterBaseline, MemorySteady Memory
	// Diff is the observations of the churn runs and the time the diff
	// stage took to apply them: (a).
	Diff Rate
	// Analytics is the churn runs' transitions and the time until they
	// were all counted in ClickHouse: (b).
	Analytics Rate
	// Latency is the end-to-end latency run: (c).
	Latency Latency
}

// Run runs Setup, Diff, Analytics and Latency on rdb (an empty database)
// and cfg.ClickHouseDSN, then cleans up unless cfg.Keep.
func Run(ctx context.Context, rdb redis.UniversalClient, cfg Config) (res Result, err error) {
	if cfg.ClickHouseDSN == "" {
		return res, errors.New("availbench: Run needs a ClickHouse DSN")
	}
	b, err := Open(ctx, rdb, cfg)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, b.Close()) }()
	res.Entities, res.Database = b.Entities(), b.Database()
	// Each phase runs with the pprof label phase=<name>
	// (go tool pprof -tagfocus phase=analytics).
	phases := []struct {
		name string
		run  func(context.Context) error
	}{
		{"setup", func(ctx context.Context) (err error) {
			res.Baseline, res.Stabilization, res.MemoryAfterBaseline, res.MemorySteady, err = b.Setup(ctx)
			return err
		}},
		{"diff", func(ctx context.Context) (err error) { res.Diff, err = b.Diff(ctx, b.cfg.Runs); return err }},
		{"analytics", func(ctx context.Context) (err error) { res.Analytics, err = b.Analytics(ctx); return err }},
		{"latency", func(ctx context.Context) (err error) { res.Latency, err = b.Latency(ctx); return err }},
	}
	for _, ph := range phases {
		pprof.Do(ctx, pprof.Labels("phase", ph.name), func(ctx context.Context) { err = ph.run(ctx) })
		if err != nil {
			return res, fmt.Errorf("availbench: %s: %w", ph.name, err)
		}
	}
	return res, nil
}
