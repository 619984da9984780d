package flow

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/internal/progress"
)

// Definition registers a flow with the binary: its name, the variables it
// reads, how it is built, its routes and its bench targets. The binary's
// definitions are listed once, a line each, in cmd/dropstream/flows.go, and
// built in that order (a flow may Find the flows listed before it).
type Definition struct {
	// Name names the flow: the prefix of its stages and services.
	Name string
	// Vars are the variables its builder reads from Deps.Settings.
	Vars []Var
	// Build builds the flow over the app's dependencies.
	Build func(ctx context.Context, d Deps) (Flow, error)
	// Routes registers the flow's API operations, nil when it has none.
	// It receives what Build returned.
	Routes func(srv *api.Server, f Flow)
	// Benches are its `dropstream bench` targets.
	Benches []Bench
}

// Define binds a flow's builder to its routes (nil: none), type-safely: the
// routes, which live in the flow's httpapi package, receive the flow's main
// type as its builder returned it.
func Define[F Flow](name string, build func(context.Context, Deps) (F, error), routes func(*api.Server, F)) Definition {
	d := Definition{Name: name, Build: func(ctx context.Context, deps Deps) (Flow, error) {
		f, err := build(ctx, deps)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return f, nil
	}}
	if routes != nil {
		d.Routes = func(srv *api.Server, f Flow) { routes(srv, f.(F)) }
	}
	return d
}

// WithVars returns d reading the variables vars too.
func (d Definition) WithVars(vars ...Var) Definition {
	d.Vars = append(append([]Var(nil), d.Vars...), vars...)
	return d
}

// WithBench returns d with the bench targets b too.
func (d Definition) WithBench(b ...Bench) Definition {
	d.Benches = append(append([]Bench(nil), d.Benches...), b...)
	return d
}

// Bench is a `dropstream bench <Name>` target.
type Bench struct {
	// Name is the target's name; Summary one or two lines for the list of
	// targets; Help the paragraph of its --help.
	Name, Summary, Help string
	// Bind binds the target's own flags on fs, beside the common ones
	// (Redis, ClickHouse, partitions, --cpuprofile), and returns what runs
	// once the flags are parsed.
	Bind func(fs *flag.FlagSet) BenchRun
}

// BenchRun is a bench target's run, once its flags are bound.
type BenchRun struct {
	// Check, if not nil, checks the flags and the configuration before
	// anything is opened: env holds RedisURL, ClickHouseDSN, RedisName and
	// Settings only. Its error fails the bench at once.
	Check func(env BenchEnv) error
	// Run measures, over the opened environment.
	Run func(ctx context.Context, env BenchEnv) error
}

// BenchEnv is what a bench target runs against: the app's Redis and
// telemetry (no API, logs at warn), and the common settings as given.
type BenchEnv struct {
	// Deps are the app's dependencies. Deps.ClickHouse is nil: a bench
	// that writes to ClickHouse opens a database of its own from
	// ClickHouseDSN.
	Deps
	// RedisURL and ClickHouseDSN are as configured ("" for embedded Redis,
	// "" for no ClickHouse); RedisName describes the Redis for a report's
	// first line, with any password masked.
	RedisURL, ClickHouseDSN, RedisName string
	// Embedded says the Redis is the in-process one.
	Embedded bool
	// RateLimit is the API's rate limit as the binary's settings give it
	// (its defaults unless --api-limits says otherwise): a bench serving
	// the API serves it with this one.
	RateLimit api.RateLimitConfig
	// Stdout takes the figures; Progress writes a line of progress to
	// stderr; Phases shows a phase of work on stderr (on a terminal a bar
	// of real counts, otherwise a line at its start and one at its end).
	Stdout   io.Writer
	Progress func(line string)
	Phases   *progress.Printer
}

// Verdict is "met" or "NOT met", as bench reports print a target.
func Verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}
