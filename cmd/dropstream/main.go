// Command dropstream is the one binary of dropstream: the demo, the stage
// runner, dead-letter administration and benchmarks.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/dropstream/dropstream/internal/memlimit"
)

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"demo", "everything in one process: embedded Redis, sample sources, API on :8080", runDemo},
		{"run", "run stages (and the API) against the configured Redis", runRun},
		{"migrate", "create or upgrade the ClickHouse schema", runMigrate},
		{"dlq", "dead letters: list, replay, purge", runDLQ},
		{"stage", "stages: list, pause, resume (in every process)", runStage},
		{"openapi", "the API's OpenAPI 3 document, as served at /openapi.json", runOpenAPI},
		{"graph", "the flows' stages and topics as a Mermaid flowchart (or --format json)", runGraph},
		{"rollups", "rollups rebuild: recompute the ClickHouse rollups from the raw tables", runRollups},
		{"retention", "drop ClickHouse partitions past their retention period", runRetention},
		{"bench", "benchmarks: bench stream|availability|... (bench --help lists them)", runBench},
	}
}

// defaultGCPercent is the GOGC used when the environment sets none. A
// stream processor allocates short-lived messages at a high rate over a
// small live heap; collecting at 4x the live heap instead of 2x cuts GC CPU
// by about a third for a few extra megabytes (see BENCHMARKS.md).
const defaultGCPercent = 400

func main() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(defaultGCPercent)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// A soft limit keeps the resident set flat at GOGC 400 (BENCHMARKS.md,
	// "Memory over an hour"); it follows the live heap up.
	go memlimit.Keep(ctx, memlimit.Default, 10*time.Second)
	err := dispatch(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dropstream:", err)
		os.Exit(1)
	}
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return errors.New("no command given")
		}
		return nil
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	usage(stderr)
	return fmt.Errorf("unknown command %q", args[0])
}

// verbFlags reads the verb of cmd, one of verbs, that args start with,
// then parses the flags after it: the common ones into cfg and those bind
// adds. verb "" is nothing to run: usage went to stderr, and err says what
// cmd needs (nil after -h or --help).
func verbFlags(cmd string, args []string, usage, summary string, stderr io.Writer, cfg *Config, bind func(*flags), verbs ...string) (verb string, fs *flags, err error) {
	if len(args) == 0 || !slices.Contains(verbs, args[0]) {
		fmt.Fprintln(stderr, usage)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return "", nil, nil
		}
		need := verbs[len(verbs)-1]
		if len(verbs) > 1 {
			need = strings.Join(verbs[:len(verbs)-1], ", ") + " or " + need
		}
		return "", nil, fmt.Errorf("%s needs %s", cmd, need)
	}
	fs = flagSet(cmd+" "+args[0], summary, stderr, cfg, "json")
	bind(fs)
	if err := fs.parse(args[1:]); err != nil {
		return "", nil, err
	}
	return args[0], fs, nil
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: dropstream <command> [flags]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'dropstream <command> --help' for its flags; a flag whose help ends in [DROPSTREAM_*]\ncan also be set by that variable.")
	printFlowVariables(w)
}
