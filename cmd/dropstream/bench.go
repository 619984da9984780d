package main

import (
	"context"
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
	dsotel "github.com/dropstream/dropstream/otel"
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

// benchTargets are the binary's own bench targets; every flow's come from
// its definition (flow.Bench).
var benchTargets = []benchTarget{
	{"stream", "one stage with a trivial handler: throughput, then per-hop latency at a fixed rate",
		func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			return runBenchStream(ctx, append([]string{"stream"}, args...), stdout, stderr)
		}},
}

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
	name := "redis " + redacted(cfg.RedisURL)
	if cfg.RedisURL == "" {
		name = "embedded miniredis"
	}
	env := flow.BenchEnv{RedisURL: cfg.RedisURL, ClickHouseDSN: cfg.ClickHouseDSN, RedisName: name, Embedded: cfg.RedisURL == "",
		Stdout: stdout, Progress: func(line string) { fmt.Fprintln(stderr, "  ", line) }}
	env.Settings = flow.Settings{Partitions: cfg.Partitions}
	if run.Check != nil {
		if err := run.Check(env); err != nil {
			return err
		}
	}
	cfg.ClickHouseDSN = "" // a bench that writes to ClickHouse opens a database of its own
	a, stop, err := benchApp(ctx, cfg, *cpuProfile, stderr)
	if err != nil {
		return err
	}
	defer stop()
	env.Deps = a.deps()
	return run.Run(ctx, env)
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

// benchStreamModes are the throughput runs of `bench stream`, in order:
// plain go-redis, then the runtime without telemetry, with 1 % of traces
// sampled (parent-based) and every metric, and with every message traced;
// "carried" is the runtime without telemetry reading messages that carry
// a trace context (published 1 % sampled), which parts the cost of
// carrying trace context from that of the runtime's telemetry.
var benchStreamModes = []string{"plain", "none", "carried", "sampled", "traced"}

// runBenchStream is `dropstream bench stream`.
func runBenchStream(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg Config
	var bc streambench.Config
	var modes string
	fs := flagSet("bench stream", "Measures the stream runtime against the configured Redis, beside plain go-redis on the same Redis in the same run.", stderr, &cfg, "json")
	fs.IntVar(&bc.Messages, "messages", 500000, "messages of each throughput run")
	fs.IntVar(&bc.BatchSize, "batch", 500, "XREADGROUP COUNT")
	fs.IntVar(&bc.PayloadSize, "payload", 200, "payload bytes")
	fs.IntVar(&bc.Rate, "rate", 10000, "publish rate of the latency run, messages/s")
	fs.DurationVar(&bc.Duration, "duration", 10*time.Second, "length of the latency run (0: none)")
	fs.StringVar(&modes, "modes", strings.Join(benchStreamModes, ","), "throughput runs: plain (go-redis alone), none (runtime, no telemetry), carried (no telemetry, messages carrying a trace context), sampled (1% of traces, all metrics), traced (every message traced, all metrics)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the runs to this file")
	if err := fs.parse(args[1:]); err != nil {
		return err
	}
	var runs []string
	for _, m := range strings.Split(modes, ",") {
		if m = strings.TrimSpace(m); !slices.Contains(benchStreamModes, m) {
			return fmt.Errorf("bench stream: mode %q: want some of %s", m, strings.Join(benchStreamModes, ", "))
		}
		runs = append(runs, m)
	}
	a, stop, err := benchApp(ctx, cfg, *cpuProfile, stderr)
	if err != nil {
		return err
	}
	defer stop()
	bc.Partitions = cfg.Partitions
	bc.Progress = func(line string) { fmt.Fprintln(stderr, "  ", line) }
	redisKind := "redis " + redacted(cfg.RedisURL)
	if a.embedded != nil {
		redisKind = "embedded miniredis"
	}
	fmt.Fprintf(stdout, "bench stream: %s, %d partitions, batch %d, payload %d B, GOMAXPROCS %d\n",
		redisKind, bc.Partitions, bc.BatchSize, bc.PayloadSize, runtime.GOMAXPROCS(0))
	rates, cpus := map[string]float64{}, map[string]time.Duration{}
	for _, mode := range runs {
		tel, shutdown := benchTelemetry(a, mode)
		c := bc
		c.Telemetry = tel
		if mode == "carried" {
			pubTel, pubShutdown := benchTelemetry(a, "sampled")
			defer pubShutdown()
			c.PublishTelemetry = &pubTel
		}
		var r streambench.Result
		if mode == "plain" {
			r, err = streambench.Plain(ctx, a.rdb, c)
		} else {
			r, err = streambench.Throughput(ctx, a.rdb, c)
		}
		shutdown()
		if err != nil {
			return fmt.Errorf("bench stream %s: %w", mode, err)
		}
		rates[mode] = r.PerSecond
		cpus[mode] = r.CPUPerMessage
		line := fmt.Sprintf("throughput %-8s %d messages in %s = %.0f msg/s, %.2f µs CPU/msg", mode+":", r.Messages,
			r.Elapsed.Round(time.Millisecond), r.PerSecond, float64(r.CPUPerMessage.Nanoseconds())/1e3)
		if base := rates["plain"]; base > 0 && mode != "plain" {
			line += fmt.Sprintf(", %.2f× plain", r.PerSecond/base)
		}
		for _, base := range []string{"none", "carried"} {
			if rates[base] > 0 && mode != "plain" && mode != "none" && mode != base {
				line += fmt.Sprintf(", %.2f× %s (CPU %.2f×)", r.PerSecond/rates[base], base, float64(r.CPUPerMessage)/float64(cpus[base]))
			}
		}
		fmt.Fprintln(stdout, line)
	}
	if bc.Duration <= 0 {
		return nil
	}
	tel, shutdown := benchTelemetry(a, "sampled")
	defer shutdown()
	bc.Telemetry = tel
	lr, err := streambench.Latency(ctx, a.rdb, bc)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "latency at %d msg/s for %s (1%% sampled, all metrics): p50 %s, p99 %s, max %s, %d duplicates\n",
		bc.Rate, bc.Duration, lr.P50.Round(time.Microsecond), lr.P99.Round(time.Microsecond), lr.Max.Round(time.Microsecond), lr.Duplicates)
	return nil
}

// benchTelemetry is the telemetry of a bench stream mode: noop providers
// for plain and none; the app's metrics and a tracer whose spans are
// batched and discarded, sampling 1 % of new traces (parent-based) for
// sampled and every one for traced.
func benchTelemetry(a *app, mode string) (stream.Telemetry, func()) {
	if mode == "plain" || mode == "none" || mode == "carried" {
		return stream.Telemetry{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider(), Logger: a.log}, func() {}
	}
	sampler := sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.01))
	if mode == "traced" {
		sampler = sdktrace.AlwaysSample()
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithBatcher(discardExporter{}))
	return stream.Telemetry{TracerProvider: tp, MeterProvider: a.otel.MeterProvider, Propagator: dsotel.NewPropagator(), Logger: a.log},
		func() { _ = tp.Shutdown(context.Background()) }
}

// discardExporter receives spans and drops them, so the benchmark pays for
// span creation and batching but not for a network.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

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
