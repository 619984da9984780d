package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/stream/streambench"
)

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "stream" {
		fmt.Fprintln(stderr, "Usage: dropstream bench stream [flags]\n\n  stream  one stage with a trivial handler: throughput, then per-hop latency at a fixed rate")
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return nil
		}
		return errors.New("bench needs a target: stream")
	}
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
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	cfg.APIAddr = ""
	cfg.LogLevel = "warn"
	a, err := newApp(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	defer a.close()
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
