package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/flows/availability/availbench"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/stream/streambench"
)

// benchTarget is one `dropstream bench <name>` target.
type benchTarget struct {
	name    string
	summary string
	// run gets the arguments after the target's name.
	run func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// benchTargets are the bench targets; bench_*.go files of other flows add
// theirs with registerBench from an init function.
var benchTargets = []benchTarget{
	{"stream", "one stage with a trivial handler: throughput, then per-hop latency at a fixed rate",
		func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			return runBenchStream(ctx, append([]string{"stream"}, args...), stdout, stderr)
		}},
	{"availability", "the availability pipeline on real Redis and ClickHouse: observations/s through diff,\n" +
		"transitions/s into ClickHouse, end-to-end latency to a webhook, Redis memory per entity",
		func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			return runBenchAvailability(ctx, append([]string{"availability"}, args...), stdout, stderr)
		}},
}

// registerBench adds a bench target; it is called from init functions.
func registerBench(t benchTarget) { benchTargets = append(benchTargets, t) }

// allBenchTargets are the binary's own targets and every flow's.
func allBenchTargets() []benchTarget {
	out := slices.Clone(benchTargets)
	for _, d := range definitions() {
		for _, b := range d.Benches {
			out = append(out, benchTarget{name: b.Name, summary: b.Summary,
				run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
					return runFlowBench(ctx, b, args, stdout, stderr)
				}})
		}
	}
	return out
}

// runFlowBench runs a flow's bench target: its own flags beside the common
// ones and --cpuprofile, then its run over the opened environment.
func runFlowBench(ctx context.Context, b flow.Bench, args []string, stdout, stderr io.Writer) error {
	var cfg Config
	fs := flagSet("bench "+b.Name, b.Help, stderr, &cfg, "json")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the bench to this file")
	run := b.Bind(fs.FlagSet)
	if err := fs.parse(args); err != nil {
		return err
	}
	chDSN := cfg.ClickHouseDSN
	cfg.ClickHouseDSN = "" // a bench that writes to ClickHouse opens a database of its own
	a, stop, err := benchApp(ctx, cfg, *cpuProfile, stderr)
	if err != nil {
		return err
	}
	defer stop()
	name := "redis " + redacted(cfg.RedisURL)
	if a.embedded != nil {
		name = "embedded miniredis"
	}
	env := flow.BenchEnv{Deps: a.deps(), RedisURL: cfg.RedisURL, ClickHouseDSN: chDSN, RedisName: name,
		Embedded: a.embedded != nil, Stdout: stdout, Progress: func(line string) { fmt.Fprintln(stderr, "  ", line) }}
	return run(ctx, env)
}

func benchUsage() string {
	var b strings.Builder
	b.WriteString("Usage: dropstream bench <target> [flags]\n")
	for _, t := range allBenchTargets() {
		b.WriteString(fmt.Sprintf("\n  %-13s %s", t.name, strings.ReplaceAll(t.summary, "\n", "\n                ")))
	}
	return b.String()
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	targets := allBenchTargets()
	if len(args) > 0 {
		for _, t := range targets {
			if t.name == args[0] {
				return t.run(ctx, args[1:], stdout, stderr)
			}
		}
	}
	fmt.Fprintln(stderr, benchUsage())
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
		return nil
	}
	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.name
	}
	return fmt.Errorf("bench needs a target: %s", strings.Join(names, ", "))
}

// runBenchStream is `dropstream bench stream`.
func runBenchStream(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg Config
	var bc streambench.Config
	var telemetry bool
	fs := flagSet("bench stream", "Measures the stream runtime against the configured Redis.", stderr, &cfg, "json")
	fs.IntVar(&bc.Messages, "messages", 500000, "messages of the throughput run")
	fs.IntVar(&bc.BatchSize, "batch", 500, "XREADGROUP COUNT")
	fs.IntVar(&bc.PayloadSize, "payload", 200, "payload bytes")
	fs.IntVar(&bc.Rate, "rate", 10000, "publish rate of the latency run, messages/s")
	fs.DurationVar(&bc.Duration, "duration", 10*time.Second, "length of the latency run")
	fs.BoolVar(&telemetry, "telemetry", true, "run with tracing (every span processed and discarded) and metrics on")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the runs to this file")
	if err := fs.parse(args[1:]); err != nil {
		return err
	}
	a, stop, err := benchApp(ctx, cfg, *cpuProfile, stderr)
	if err != nil {
		return err
	}
	defer stop()
	bc.Partitions = cfg.Partitions
	if telemetry {
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardExporter{}))
		defer func() { _ = tp.Shutdown(context.Background()) }()
		bc.Telemetry = stream.Telemetry{TracerProvider: tp, MeterProvider: a.otel.MeterProvider, Logger: a.log}
	} else {
		bc.Telemetry = stream.Telemetry{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider(), Logger: a.log}
	}
	bc.Progress = func(line string) { fmt.Fprintln(stderr, "  ", line) }
	redisKind := "redis " + cfg.RedisURL
	if a.embedded != nil {
		redisKind = "embedded miniredis"
	}
	fmt.Fprintf(stdout, "bench stream: %s, %d partitions, batch %d, payload %d B, telemetry %v, GOMAXPROCS %d\n",
		redisKind, bc.Partitions, bc.BatchSize, bc.PayloadSize, telemetry, runtime.GOMAXPROCS(0))
	tr, err := streambench.Throughput(ctx, a.rdb, bc)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "throughput: %d messages in %s = %.0f msg/s\n", tr.Messages, tr.Elapsed.Round(time.Millisecond), tr.PerSecond)
	lr, err := streambench.Latency(ctx, a.rdb, bc)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "latency at %d msg/s for %s: p50 %s, p99 %s, max %s, %d duplicates\n",
		bc.Rate, bc.Duration, lr.P50.Round(time.Microsecond), lr.P99.Round(time.Microsecond), lr.Max.Round(time.Microsecond), lr.Duplicates)
	return nil
}

// discardExporter receives spans and drops them, so the benchmark pays for
// span creation and batching but not for a network.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

// runBenchAvailability is `dropstream bench availability`.
func runBenchAvailability(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg Config
	var bc availbench.Config
	fs := flagSet("bench availability", "Measures the availability pipeline against the configured Redis (an empty database)\n"+
		"and ClickHouse (in a database of its own): observations/s through diff, transitions/s into\n"+
		"ClickHouse, end-to-end latency from observation to webhook, Redis memory per entity.", stderr, &cfg, "json")
	fs.IntVar(&bc.Scopes, "scopes", availbench.DefaultScopes, "scopes (venues), one webhook watcher each")
	fs.IntVar(&bc.PerScope, "per-scope", availbench.DefaultPerScope, "entities observed per run of a scope")
	fs.Float64Var(&bc.Churn, "churn", availbench.DefaultChurn, "fraction of a scope's entities replaced per run")
	fs.IntVar(&bc.Runs, "runs", availbench.DefaultRuns, "measured churn runs of every scope")
	fs.IntVar(&bc.Rate, "rate", availbench.DefaultRate, "observations/s of the latency run")
	fs.DurationVar(&bc.LatencyDuration, "latency-duration", availbench.DefaultLatencyDuration, "length of the latency run")
	fs.IntVar(&bc.DiffCopies, "diff-copies", 1, "copies of the diff stage")
	fs.IntVar(&bc.AnalyticsCopies, "analytics-copies", 1, "copies of each analytics stage")
	fs.IntVar(&bc.DiffBatch, "diff-batch", 0, "XREADGROUP COUNT of the diff stage (0: the stage's default)")
	fs.BoolVar(&bc.Keep, "keep", false, "keep the Redis keys and the ClickHouse database")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the bench to this file; samples carry the label phase=setup|diff|analytics|latency (go tool pprof -tagfocus)")
	if err := fs.parse(args[1:]); err != nil {
		return err
	}
	if cfg.RedisURL == "" || cfg.ClickHouseDSN == "" {
		return errors.New("bench availability needs a real Redis and ClickHouse: set --redis-url and --clickhouse-dsn")
	}
	bc.ClickHouseDSN, cfg.ClickHouseDSN = cfg.ClickHouseDSN, "" // the bench opens its own database
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
	fmt.Fprintf(stdout, "bench availability: redis %s, %d scopes × %d entities = %d, churn %g, %d runs, %d partitions, GOMAXPROCS %d\n",
		redacted(cfg.RedisURL), bc.Scopes, bc.PerScope, bc.Scopes*bc.PerScope, bc.Churn, bc.Runs, bc.Partitions, runtime.GOMAXPROCS(0))
	res, err := availbench.Run(ctx, a.rdb, bc)
	if err != nil {
		return err
	}
	printAvailability(stdout, bc, res)
	return nil
}

// printAvailability writes the bench's figures and how they compare with
// the targets.
func printAvailability(w io.Writer, bc availbench.Config, r availbench.Result) {
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	rate := func(x availbench.Rate) string {
		return fmt.Sprintf("%d in %s = %.0f/s", x.Count, x.Elapsed.Round(time.Millisecond), x.PerSecond())
	}
	fmt.Fprintf(w, "setup: baseline run %s observations, stabilization run %s observations\n", rate(r.Baseline), rate(r.Stabilization))
	fmt.Fprintf(w, "(a) diff: %s observations (%d churn runs) [target ≥ %d/s: %s]\n", rate(r.Diff), bc.Runs,
		availbench.TargetObservationsPerSecond, verdict(r.Diff.PerSecond() >= availbench.TargetObservationsPerSecond))
	fmt.Fprintf(w, "(b) clickhouse: %s transitions [target ≥ %d/s: %s]\n", rate(r.Analytics),
		availbench.TargetTransitionsPerSecond, verdict(r.Analytics.PerSecond() >= availbench.TargetTransitionsPerSecond))
	l := r.Latency
	fmt.Fprintf(w, "(c) end to end at %d observations/s for %s: %d of %d notifications, %d duplicates, p50 %s, p99 %s, max %s [target p99 ≤ %dms: %s]\n",
		l.Rate, l.Elapsed.Round(time.Millisecond), l.Received, l.Expected, l.Duplicates, l.P50.Round(10*time.Microsecond),
		l.P99.Round(10*time.Microsecond), l.Max.Round(10*time.Microsecond), availbench.TargetP99Millis,
		verdict(l.Received == l.Expected && l.P99 <= availbench.TargetP99Millis*time.Millisecond))
	fmt.Fprintf(w, "(d) redis memory: %.1f bytes/entity after the baseline run (%d bytes for %d entities), %.1f after stabilization [target ≤ %d: %s]\n",
		r.MemoryAfterBaseline.PerEntity(), r.MemoryAfterBaseline.Bytes, r.MemoryAfterBaseline.Entities, r.MemorySteady.PerEntity(),
		availbench.TargetBytesPerEntity, verdict(r.MemoryAfterBaseline.PerEntity() <= availbench.TargetBytesPerEntity))
}

// redacted is a URL with its password masked; other strings as they are.
func redacted(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		return u.Redacted()
	}
	return s
}

// benchApp starts the app of a benchmark (no API, warnings only) and, with
// a profile path, a CPU profile; stop ends both.
func benchApp(ctx context.Context, cfg Config, cpuProfile string, stderr io.Writer) (*app, func(), error) {
	stopProfile := func() {}
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return nil, nil, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, nil, err
		}
		stopProfile = func() { pprof.StopCPUProfile(); f.Close() }
	}
	cfg.APIAddr = ""
	cfg.LogLevel = "warn"
	a, err := newApp(ctx, cfg, stderr)
	if err != nil {
		stopProfile()
		return nil, nil, err
	}
	return a, func() { a.close(); stopProfile() }, nil
}
