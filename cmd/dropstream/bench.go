package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"runtime/pprof"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/flows/feed/feedbench"
	"github.com/dropstream/dropstream/internal/benchstat"
	"github.com/dropstream/dropstream/internal/progress"
	"github.com/dropstream/dropstream/notifier/notifierbench"
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
	{"api", "the API serving its most called read routes and one write route, loaded from another process: requests/s, p50/p99 at a fixed rate, CPU per request", runBenchAPI},
	{"soak", "demo and run, idle and under a light load, side by side for an hour: RSS, live heap, goroutines, Redis keys", runBenchSoak},
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
	gauge := fs.Int("gauge-messages", 100_000, "messages of the plain go-redis gauge run before the bench (0: no gauge)")
	run := b.Bind(fs.FlagSet)
	if err := fs.parse(args); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if *gauge < 0 || *gauge > 10_000_000 {
		return fmt.Errorf("bench %s: --gauge-messages %d out of range 0..10000000", b.Name, *gauge)
	}
	fmt.Fprint(stdout, fs.benchSettings())
	env := flow.BenchEnv{RedisURL: cfg.RedisURL, ClickHouseDSN: cfg.ClickHouseDSN, RedisName: benchRedisName(cfg), Embedded: cfg.RedisURL == "",
		RateLimit: cfg.rateLimits(), Stdout: stdout, Phases: progress.New(stderr), Self: selfCommand}
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
	if err := benchGauge(ctx, env, *gauge); err != nil {
		return err
	}
	return run.Run(ctx, env)
}

// benchGauge prints the gauge of the bench's Redis: the rate at which
// plain go-redis consumes messages from it (streambench.Plain), so figures
// of different machines compare. The embedded Redis gets a note instead.
func benchGauge(ctx context.Context, env flow.BenchEnv, messages int) error {
	_, cluster := env.Redis.(*redis.ClusterClient)
	switch {
	case env.Embedded:
		fmt.Fprintln(env.Stdout, "gauge: none, the embedded miniredis is not a Redis to gauge")
		return nil
	case cluster:
		fmt.Fprintln(env.Stdout, "gauge: none, the plain go-redis gauge reads every partition in one call, which a Redis Cluster refuses")
		return nil
	case messages == 0:
		fmt.Fprintln(env.Stdout, "gauge: none (--gauge-messages 0)")
		return nil
	}
	r, err := streambench.Plain(ctx, env.Redis, streambench.Config{Messages: messages, Progress: env.Phases.With("gauge ")})
	if err != nil {
		return fmt.Errorf("bench gauge: %w", err)
	}
	fmt.Fprintf(env.Stdout, "gauge: plain go-redis %.0f msg/s (%d messages XADDed, then read by XREADGROUP COUNT 500 and XACKed; the read is timed)\n",
		r.PerSecond, messages)
	return nil
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
	switch {
	case len(args) > 0 && args[0] == benchstat.LoadArgs[1]: // a bench's load process
		return runLoadTarget(ctx, os.Stdin, stdout)
	case len(args) > 0 && args[0] == feedbench.ServerArgs[1]: // the feed bench's feed server
		return feedbench.Serve(ctx, args[1:], os.Stdin, stdout)
	case len(args) > 0 && args[0] == notifierbench.SinkArgs[1]: // the notifier bench's webhook sink
		return notifierbench.ServeSink(ctx, args[1:], os.Stdin, stdout)
	}
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

// benchRedisName describes the bench's Redis with any password masked.
func benchRedisName(cfg Config) string {
	if cfg.RedisURL == "" {
		return "embedded miniredis"
	}
	if u, err := url.Parse(cfg.RedisURL); err == nil && u.User != nil {
		return "redis " + u.Redacted()
	}
	return "redis " + cfg.RedisURL
}

// startCPUProfile starts a CPU profile to path, if any; stop ends it.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// benchApp starts the app of a benchmark (no API, warnings only) and a CPU
// profile to cpuProfile, if any; stop ends both.
func benchApp(ctx context.Context, cfg Config, cpuProfile string, stderr io.Writer) (*app, func(), error) {
	stopProfile, err := startCPUProfile(cpuProfile)
	if err != nil {
		return nil, nil, err
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
