package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/dropstream/dropstream/internal/benchstat"
	"github.com/dropstream/dropstream/internal/progress"
	"github.com/dropstream/dropstream/internal/settings"
	dsotel "github.com/dropstream/dropstream/otel"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/stream/streambench"
)

// benchStreamModes are the runs of `bench stream`: plain go-redis, the
// runtime without telemetry, 1 % sampled, every message traced, and
// "carried" (no telemetry, messages carrying a trace context).
var benchStreamModes = []string{"plain", "none", "carried", "sampled", "traced"}

// streamRound is what one round of `bench stream` measured, by mode.
type streamRound map[string]streambench.Result

// ratio is mode's throughput over base's (0 when either is missing).
func (r streamRound) ratio(mode, base string) float64 {
	if r[mode].PerSecond == 0 || r[base].PerSecond == 0 {
		return 0
	}
	return r[mode].PerSecond / r[base].PerSecond
}

// runBenchStream is `dropstream bench stream`.
func runBenchStream(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg Config
	var bc streambench.Config
	var modes string
	var rounds int
	fs := flagSet("bench stream", "Measures the stream runtime against the configured Redis, beside plain go-redis on the same Redis in the same run.", stderr, &cfg, "json")
	fs.IntVar(&bc.Messages, "messages", 500000, "messages of each throughput run")
	fs.IntVar(&bc.ReadBytes, "read-bytes", stream.DefaultReadBytes, "the stage's ReadBytes: its reads ask for about this many bytes of entries")
	settings.BindFlags(fs.FlagSet, &bc)
	fs.StringVar(&modes, "modes", strings.Join(benchStreamModes, ","), "throughput runs: plain (go-redis alone), none (runtime, no telemetry), carried (no telemetry, messages carrying a trace context), sampled (1% of traces, all metrics), traced (every message traced, all metrics)")
	fs.IntVar(&rounds, "rounds", 1, "times to run the modes, every other time in reverse order; with more than one, the medians of the rounds' ratios follow")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the runs to this file")
	if err := fs.parse(args[1:]); err != nil {
		return err
	}
	if rounds < 1 || rounds > 100 {
		return fmt.Errorf("bench stream: --rounds %d: want 1 to 100", rounds)
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
	bc.Progress = progress.New(stderr)
	redisKind := benchRedisName(cfg)
	fmt.Fprint(stdout, fs.benchSettings())
	fmt.Fprintf(stdout, "bench stream: %s, %d partitions, batch %d, read bytes %d, payload %d B, GOMAXPROCS %d\n",
		redisKind, bc.Partitions, bc.BatchSize, bc.ReadBytes, bc.PayloadSize, runtime.GOMAXPROCS(0))
	var all []streamRound
	for i := range rounds {
		prefix := ""
		if rounds > 1 {
			prefix = fmt.Sprintf("round %d/%d ", i+1, rounds)
		}
		// Every other round runs in reverse, so a drifting machine favours no mode.
		r, err := benchStreamRound(ctx, a, bc, runs, i%2 == 1, prefix, stdout)
		if err != nil {
			return err
		}
		all = append(all, r)
	}
	if rounds > 1 {
		printStreamMedians(stdout, all, runs)
	}
	if bc.Duration <= 0 {
		return nil
	}
	tel, shutdown := benchTelemetry(a, "sampled")
	defer shutdown()
	bc.Telemetry = tel
	bc.Progress = bc.Progress.With("latency ")
	lr, err := streambench.Latency(ctx, a.rdb, bc)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "latency at %d msg/s for %s (1%% sampled, all metrics): %s, %d duplicates\n",
		bc.Rate, bc.Duration, lr.Latencies.Round(time.Microsecond), lr.Duplicates)
	return nil
}

// benchStreamRound runs each mode once (reversed when reverse is set) and
// prints a line per mode with its ratios to plain, none and carried.
func benchStreamRound(ctx context.Context, a *app, bc streambench.Config, runs []string, reverse bool, prefix string, stdout io.Writer) (streamRound, error) {
	round, spans := streamRound{}, map[string]spanCounts{}
	order := slices.Clone(runs)
	if reverse {
		slices.Reverse(order)
	}
	for _, mode := range order {
		r, s, err := benchStreamMode(ctx, a, bc, mode, prefix)
		if err != nil {
			return round, fmt.Errorf("bench stream %s: %w", mode, err)
		}
		round[mode], spans[mode] = r, s
	}
	for _, mode := range runs {
		r := round[mode]
		line := fmt.Sprintf("%sthroughput %-8s %d messages in %s = %.0f msg/s, %.2f µs CPU/msg", prefix, mode+":", r.Messages,
			r.Elapsed.Round(time.Millisecond), r.PerSecond, benchstat.Micros(r.CPU.Process))
		if r.CPU.Redis > 0 {
			line += fmt.Sprintf(" + %.2f µs Redis", benchstat.Micros(r.CPU.Redis))
		}
		if mode != "plain" && round["plain"].PerSecond > 0 {
			line += fmt.Sprintf(", %.2f× plain", round.ratio(mode, "plain"))
		}
		for _, base := range []string{"none", "carried"} {
			if round[base].PerSecond > 0 && mode != "plain" && mode != "none" && mode != base {
				line += fmt.Sprintf(", %.2f× %s (CPU %.2f×)", round.ratio(mode, base), base, float64(r.CPU.Process)/float64(round[base].CPU.Process))
			}
		}
		if s := spans[mode]; s.ended > 0 {
			line += fmt.Sprintf("; spans: %d ended, %d exported, %d dropped", s.ended, s.exported, s.ended-s.exported)
		}
		fmt.Fprintln(stdout, line)
	}
	return round, nil
}

// benchStreamMode runs one mode's throughput with that mode's telemetry, and
// counts the spans its stage and publisher ended and exported.
func benchStreamMode(ctx context.Context, a *app, bc streambench.Config, mode, prefix string) (streambench.Result, spanCounts, error) {
	tel, shutdown := benchTelemetry(a, mode)
	c := bc
	c.Telemetry = tel
	c.Progress = bc.Progress.With(prefix + mode + " ")
	if mode == "carried" {
		pubTel, pubShutdown := benchTelemetry(a, "sampled")
		defer pubShutdown()
		c.PublishTelemetry = &pubTel
	}
	run := streambench.Throughput
	if mode == "plain" {
		run = streambench.Plain
	}
	r, err := run(ctx, a.rdb, c)
	return r, shutdown(), err
}

// printStreamMedians prints per mode the median throughput and the median
// and range of its per-round ratios, which a drifting machine moves less.
func printStreamMedians(stdout io.Writer, rounds []streamRound, runs []string) {
	for _, mode := range runs {
		rates := make([]float64, len(rounds))
		for i, r := range rounds {
			rates[i] = r[mode].PerSecond
		}
		line := fmt.Sprintf("median of %d rounds %-8s %.0f msg/s", len(rounds), mode+":", median(rates))
		for _, base := range []string{"plain", "none"} {
			if mode == base || rounds[0][base].PerSecond == 0 {
				continue
			}
			ratios := make([]float64, len(rounds))
			for i, r := range rounds {
				ratios[i] = r.ratio(mode, base)
			}
			slices.Sort(ratios)
			line += fmt.Sprintf(", %.2f× %s (%.2f–%.2f)", median(ratios), base, ratios[0], ratios[len(ratios)-1])
		}
		fmt.Fprintln(stdout, line)
	}
}

// median is the median of xs, which it sorts.
func median(xs []float64) float64 {
	slices.Sort(xs)
	n := len(xs)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// benchTelemetry is a mode's telemetry. Plain, none and carried get no-op
// providers; sampled and traced get the app's metrics and spans (1% or all)
// through the binary's tracer provider to an exporter that counts and drops
// them, so the bench pays for spans but not for a network. shutdown
// flushes the spans and returns the counts.
func benchTelemetry(a *app, mode string) (tel stream.Telemetry, shutdown func() spanCounts) {
	if mode == "plain" || mode == "none" || mode == "carried" {
		return stream.Telemetry{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider(), Logger: a.log},
			func() spanCounts { return spanCounts{} }
	}
	sampler := sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.01))
	if mode == "traced" {
		sampler = sdktrace.AlwaysSample()
	}
	counts := &spanCounts{}
	tp := dsotel.NewTracerProvider(sampler, nil, counts)
	tp.RegisterSpanProcessor(counts)
	return stream.Telemetry{TracerProvider: tp, MeterProvider: a.otel.MeterProvider, Propagator: dsotel.NewPropagator(), Logger: a.log},
		func() spanCounts {
			_ = tp.Shutdown(context.Background())
			return spanCounts{ended: atomic.LoadInt64(&counts.ended), exported: atomic.LoadInt64(&counts.exported)}
		}
}

// spanCounts counts the sampled spans that ended (as a span processor) and
// those exported (as the exporter, which then drops them).
type spanCounts struct{ ended, exported int64 }

func (c *spanCounts) OnEnd(s sdktrace.ReadOnlySpan) {
	if s.SpanContext().IsSampled() {
		atomic.AddInt64(&c.ended, 1)
	}
}

func (c *spanCounts) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	atomic.AddInt64(&c.exported, int64(len(spans)))
	return nil
}

func (*spanCounts) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (*spanCounts) ForceFlush(context.Context) error                { return nil }
func (*spanCounts) Shutdown(context.Context) error                  { return nil }
