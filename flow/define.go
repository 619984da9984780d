package flow

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os/exec"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/internal/progress"
)

// Definition registers a flow with the binary: name, variables, builder,
// routes and bench targets. Flows are built in the order of
// cmd/dropstream/flows.go; a flow may Find those before it.
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

// Define binds a flow's builder to its routes (nil: none), which receive
// the flow's main type.
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
	// Bind binds the target's own flags on fs and returns what runs once
	// they are parsed.
	Bind func(fs *flag.FlagSet) BenchRun
}

// BenchRun is a bench target's run, once its flags are bound.
type BenchRun struct {
	// Check, if not nil, checks flags and configuration before anything is
	// opened (env holds only the URLs, RedisName and Settings).
	Check func(env BenchEnv) error
	// Run measures, over the opened environment.
	Run func(ctx context.Context, env BenchEnv) error
}

// BenchEnv is what a bench target runs against: the app's Redis and
// telemetry (no API, logs at warn), and the common settings as given.
type BenchEnv struct {
	// Deps are the app's dependencies, without ClickHouse: a bench opens
	// its own from ClickHouseDSN.
	Deps
	// RedisURL and ClickHouseDSN are as configured (""s: embedded Redis, no
	// ClickHouse); RedisName names the Redis, password masked.
	RedisURL, ClickHouseDSN, RedisName string
	// Embedded says the Redis is the in-process one.
	Embedded bool
	// RateLimit is the API's configured rate limit.
	RateLimit api.RateLimitConfig
	// Stdout takes the figures; Phases reports on stderr.
	Stdout io.Writer
	Phases *progress.Printer
	// Self runs the binary with args: a bench's helper process (its load,
	// benchstat.LoadArgs), whose CPU stays out of the bench process's.
	Self func(args ...string) *exec.Cmd
}

// Verdict is "met" or "NOT met", as bench reports print a target.
func Verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}
