package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/api/stageadmin"
	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/console"
	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/internal/tick"
	dsotel "github.com/dropstream/dropstream/otel"
	"github.com/dropstream/dropstream/otel/spanbuffer"
	"github.com/dropstream/dropstream/stream"
)

// app is the wired process: telemetry, Redis, ClickHouse, API and flows.
type app struct {
	cfg      Config
	log      *slog.Logger
	otel     *dsotel.Providers
	tel      stream.Telemetry
	rdb      redis.UniversalClient
	embedded *stream.Embedded
	ch       *clickhouse.Client
	pub      *stream.Publisher
	settings flow.Settings
	// retention and retentionInterval drive the retention service.
	retention         clickhouse.RetentionConfig
	retentionInterval time.Duration
	flows             []*builtFlow // in the order of definitions()
	flowsBuilt        bool
	runners           atomic.Pointer[[]*stream.Runner] // for the "stages" check
	traces            *spanbuffer.Buffer               // what the console shows
	console           *console.Console
	closers           []func()
}

// builtFlow is one flow as built, with its ClickHouse append stages.
type builtFlow struct {
	def     flow.Definition
	flow    flow.Flow
	desc    flow.Description
	history []stream.Stage
}

// newApp connects everything cfg names and reads the flows' variables.
// With no Redis URL it starts an embedded Redis.
func newApp(ctx context.Context, cfg Config, stderr io.Writer) (*app, error) {
	return newAppWith(ctx, cfg, nil, stderr)
}

// newAppWith is newApp with flow variables set by the command's flags.
func newAppWith(ctx context.Context, cfg Config, overrides map[string]string, stderr io.Writer) (_ *app, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	instance, err := instanceID(cfg.Instance, os.Hostname)
	if err != nil {
		return nil, err
	}
	cfg.Instance = instance
	settings, err := readSettingsWith(cfg, overrides, os.LookupEnv)
	if err != nil {
		return nil, err
	}
	level, _ := parseLevel(cfg.LogLevel)
	logger := dsotel.NewLogger(stderr, dsotel.LogConfig{Format: cfg.LogFormat, Level: level})
	slog.SetDefault(logger)
	a := &app{cfg: cfg, log: logger, settings: settings}
	defer func() {
		if err != nil {
			a.close()
		}
	}()
	if cfg.ClickHouseDSN != "" {
		if err := a.readRetention(); err != nil {
			return nil, err
		}
	}
	prov, err := dsotel.Setup(ctx, dsotel.Config{Embedded: cfg.RedisURL == "", ServiceName: cfg.serviceName()})
	if err != nil {
		return nil, err
	}
	prov.SetGlobal()
	a.otel = prov
	a.traces = spanbuffer.New(spanbuffer.Config{Traces: keptTraces, Ignore: func(name string) bool {
		return strings.Contains(name, " "+console.Path) // the console's polling would push the pipeline's traces out
	}})
	prov.AddSpanProcessor(a.traces)
	a.closers = append(a.closers, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = prov.Shutdown(sctx)
	})
	a.tel = stream.Telemetry{TracerProvider: prov.TracerProvider, MeterProvider: prov.MeterProvider, Logger: logger}
	url := cfg.RedisURL
	if url == "" {
		emb, err := stream.StartEmbedded()
		if err != nil {
			return nil, err
		}
		a.embedded = emb
		a.closers = append(a.closers, emb.Close)
		url = emb.URL()
		logger.Warn("DROPSTREAM_REDIS_URL is empty: using an embedded in-process Redis; nothing survives a restart",
			"addr", emb.Addr())
	}
	rdb, err := stream.Dial(ctx, url)
	if err != nil {
		return nil, err
	}
	a.rdb = rdb
	a.closers = append(a.closers, func() { _ = rdb.Close() })
	if cfg.ClickHouseDSN != "" {
		ch, err := clickhouse.Open(ctx, clickhouse.Config{DSN: cfg.ClickHouseDSN})
		if err != nil {
			return nil, err
		}
		a.ch = ch
		a.closers = append(a.closers, func() { _ = ch.Close() })
	}
	a.pub = stream.NewPublisher(rdb, a.tel)
	if cfg.PprofAddr != "" {
		stop, err := servePprof(cfg.PprofAddr, logger)
		if err != nil {
			return nil, err
		}
		a.closers = append(a.closers, stop)
	}
	return a, nil
}

// close releases everything, last opened first.
func (a *app) close() {
	for i := len(a.closers) - 1; i >= 0; i-- {
		a.closers[i]()
	}
	a.closers = nil
}

// deps are the dependencies every flow's builder gets.
func (a *app) deps() flow.Deps {
	return flow.Deps{Redis: a.rdb, Publisher: a.pub, ClickHouse: a.ch, Telemetry: a.tel, Settings: a.settings,
		Flows: func(name string) (flow.Flow, bool) {
			for _, f := range a.flows {
				if f.def.Name == name {
					return f.flow, true
				}
			}
			return nil, false
		}}
}

// buildFlows builds every flow once and, with ClickHouse, opens its appends.
func (a *app) buildFlows(ctx context.Context) error {
	if a.flowsBuilt {
		return nil
	}
	a.flowsBuilt = true
	for _, def := range definitions() {
		f, err := def.Build(ctx, a.deps())
		if err != nil {
			return fmt.Errorf("flow %w", err)
		}
		a.closers = append(a.closers, func() {
			if err := f.Close(); err != nil {
				a.log.Warn("closing a flow failed", "flow", def.Name, "error", err)
			}
		})
		b := &builtFlow{def: def, flow: f, desc: f.Describe()}
		if err := b.desc.Validate(def.Name); err != nil {
			return err
		}
		a.flows = append(a.flows, b)
		if a.ch == nil {
			continue
		}
		for _, h := range b.desc.History {
			stages, closeFn, err := h.Open(ctx, a.ch)
			if err != nil {
				return fmt.Errorf("flow %s: history %v: %w", def.Name, h.Tables, err)
			}
			if closeFn != nil {
				a.closers = append(a.closers, func() { _ = closeFn() })
			}
			// A stage offered in several read-ahead copies runs its first.
			for _, st := range stages {
				if !slices.ContainsFunc(b.history, func(h stream.Stage) bool { return h.Name == st.Name }) {
					b.history = append(b.history, st)
				}
			}
		}
	}
	return nil
}

// apiServer builds the API with every flow's routes.
func (a *app) apiServer() (*api.Server, error) {
	checks := []api.ReadinessCheck{{Name: "redis", Check: func(ctx context.Context) error { return a.rdb.Ping(ctx).Err() }},
		{Name: "stages", Check: a.stagesReady}}
	if a.ch != nil {
		checks = append(checks, api.ReadinessCheck{Name: "clickhouse", Check: a.ch.Ping})
	}
	srv, err := api.New(api.Config{Addr: a.cfg.APIAddr, APIKeys: a.cfg.APIKeys, Logger: a.log,
		TracerProvider: a.otel.TracerProvider, MeterProvider: a.otel.MeterProvider,
		MetricsHandler: a.otel.MetricsHandler(), Checks: checks, RateLimit: a.cfg.rateLimits()})
	if err != nil {
		return nil, err
	}
	for _, f := range a.flows {
		if f.def.Routes != nil {
			f.def.Routes(srv, f.flow)
		}
	}
	stages, err := a.adminStages()
	if err != nil {
		return nil, err
	}
	stageadmin.Register(srv, stream.NewControl(a.rdb), stages)
	if err := a.registerConsole(srv); err != nil {
		return nil, err
	}
	return srv, nil
}

// stages returns every stage of the flows, history stages included, by name.
func (a *app) stages() (map[string]stream.Stage, error) {
	if err := a.buildFlows(context.Background()); err != nil {
		return nil, err
	}
	all := map[string]stream.Stage{}
	for _, f := range a.flows {
		for _, s := range slices.Concat(f.desc.Stages, f.history) {
			if _, dup := all[s.Name]; dup {
				return nil, fmt.Errorf("flow %s: stage %q defined twice", f.def.Name, s.Name)
			}
			all[s.Name] = s
		}
	}
	return all, nil
}

// services are the named loops beside the stages, by name.
func (a *app) services() map[string]func(context.Context) error {
	all := a.appServices()
	for _, f := range a.flows {
		for _, s := range f.desc.Services {
			all[s.Name] = s.Run
		}
	}
	return all
}

// topics returns every topic consumed by a known stage.
func (a *app) topics() ([]stream.Topic, error) {
	stages, err := a.stages()
	if err != nil {
		return nil, err
	}
	seen := map[string]stream.Topic{}
	for _, s := range stages {
		seen[s.Topic.String()] = s.Topic
	}
	return slices.SortedFunc(maps.Values(seen), func(a, b stream.Topic) int { return strings.Compare(a.String(), b.String()) }), nil
}

// pick selects stages and services by a comma list of names ("all", "none").
func pick(all map[string]stream.Stage, services map[string]func(context.Context) error, names string) ([]stream.Stage, []string, error) {
	known := slices.AppendSeq(slices.Collect(maps.Keys(all)), maps.Keys(services))
	slices.Sort(known)
	var stages []stream.Stage
	var svcs []string
	if strings.TrimSpace(names) == "none" {
		return nil, nil, nil
	}
	want := known
	if names != "" && names != "all" {
		want = strings.Split(names, ",")
	}
	for _, n := range want {
		n = strings.TrimSpace(n)
		if s, ok := all[n]; ok {
			stages = append(stages, s)
		} else if _, ok := services[n]; ok {
			svcs = append(svcs, n)
		} else {
			return nil, nil, fmt.Errorf("unknown stage %q; known: %s", n, strings.Join(known, ", "))
		}
	}
	return stages, svcs, nil
}

// startOptions are what `run` and `demo` choose of the generic start-up.
type startOptions struct {
	stages   []stream.Stage
	services []string
	copies   int
	trimAge  time.Duration // the Trimmer's MinAge
}

// start runs, until ctx ends, the flows' waiters, copies of the chosen
// stages, the services and a trimmer. A part that fails sends its error on
// the returned channel.
func (a *app) start(ctx context.Context, wg *sync.WaitGroup, o startOptions) ([]*stream.Runner, chan error, error) {
	if err := a.keepBacklogs(ctx); err != nil {
		return nil, nil, err
	}
	var runners []*stream.Runner
	for _, s := range o.stages {
		for i := 0; i < o.copies; i++ {
			st := s
			st.Config.Instance = cmp.Or(st.Config.Instance, a.cfg.Instance)
			st.Config.Copy = i
			r, err := stream.NewRunner(a.rdb, st, a.tel)
			if err != nil {
				return nil, nil, err
			}
			runners = append(runners, r)
		}
	}
	a.runners.Store(&runners)
	failed := make(chan error, len(runners)+len(o.services)+len(a.flows)*2+8)
	for _, f := range a.flows {
		for _, w := range f.desc.Waiters {
			wg.Go(func() {
				if err := w.Run(ctx); err != nil && ctx.Err() == nil {
					a.log.Error("a waiter stopped", "flow", f.def.Name, "waiter", w.Name, "error", err)
				}
			})
		}
	}
	for _, r := range runners {
		wg.Go(func() {
			if err := r.Run(ctx); err != nil {
				failed <- fmt.Errorf("stage %s: %w", r.Info().Stage, err)
			}
		})
	}
	all := a.services()
	for _, n := range o.services {
		run := all[n]
		wg.Go(func() {
			if err := run(ctx); err != nil && ctx.Err() == nil {
				failed <- fmt.Errorf("%s: %w", n, err)
			}
		})
	}
	topics := make([]stream.Topic, 0, len(o.stages))
	for _, s := range o.stages {
		topics = append(topics, s.Topic)
	}
	cfg := stream.TrimConfig{MinAge: o.trimAge}
	if a.embedded != nil && a.ch == nil {
		// Nothing reads what only the appends would: trimmed by age.
		cfg.Ungrouped = true
		for _, f := range a.flows {
			for _, h := range f.desc.History {
				for _, g := range h.Groups {
					if !slices.ContainsFunc(topics, func(t stream.Topic) bool { return t.Stream(0) == g.Topic.Stream(0) }) {
						topics = append(topics, g.Topic)
					}
				}
			}
		}
	}
	trimmer := stream.NewTrimmer(a.rdb, cfg, a.log, topics...)
	wg.Go(func() { trimmer.Run(ctx) })
	return runners, failed, nil
}

// startDemo starts, as `demo` does, every stage and service and, beside
// them, the flows' demo data; errors go to the returned channel.
func (a *app) startDemo(ctx context.Context, wg *sync.WaitGroup) ([]*stream.Runner, chan error, error) {
	all, err := a.stages()
	if err != nil {
		return nil, nil, err
	}
	stages, services, err := pick(all, a.services(), "all")
	if err != nil {
		return nil, nil, err
	}
	runners, failed, err := a.start(ctx, wg, startOptions{stages: stages, services: services, copies: 1, trimAge: 10 * time.Minute})
	if err != nil {
		return nil, nil, err
	}
	for _, f := range a.flows {
		if f.desc.Demo != nil {
			wg.Go(func() { keepDemo(ctx, a.log.With("flow", f.def.Name), f.desc.Demo, demoRetryFirst) })
		}
	}
	return runners, failed, nil
}

// demoRetryFirst is keepDemo's first pause; later ones double up to 30 s.
const demoRetryFirst = time.Second

// keepDemo runs demo until it returns nil or ctx ends. A failed attempt
// (a Redis timeout on a loaded machine, say) is logged, its context
// cancelled, and the demo started again after a backoff: the demo's data
// never stops the process.
func keepDemo(ctx context.Context, log *slog.Logger, demo func(context.Context) error, first time.Duration) {
	b := stream.NewBackoff(first, 30*time.Second, 0.2)
	for ctx.Err() == nil {
		attempt, cancel := context.WithCancel(ctx)
		err := demo(attempt)
		if err == nil {
			// The attempt lives on: the demo's goroutines run under it.
			context.AfterFunc(ctx, cancel)
			return
		}
		cancel()
		pause := b.NextBackOff()
		log.Warn("demo data failed; starting it again", "error", err, "in", pause.Round(time.Millisecond))
		_ = tick.Sleep(ctx, pause)
	}
}

// serve runs srv and the console's sampler until ctx ends; a listen error
// goes to failed.
func (a *app) serve(ctx context.Context, wg *sync.WaitGroup, srv *api.Server, failed chan<- error) {
	wg.Go(func() {
		if err := srv.Listen(ctx); err != nil {
			failed <- fmt.Errorf("api: %w", err)
		}
	})
	wg.Go(func() { _ = a.console.Run(ctx) })
}

// stagesReady fails while another process holds a consumer name of this
// one's (stream.Runner.LeaseErr). It names stages only: /readyz is public.
func (a *app) stagesReady(context.Context) error {
	rs := a.runners.Load()
	if rs == nil {
		return nil
	}
	var held []string
	for _, r := range *rs {
		if r.LeaseErr() != nil && !slices.Contains(held, r.Info().Stage) {
			held = append(held, r.Info().Stage)
		}
	}
	if len(held) == 0 {
		return nil
	}
	return fmt.Errorf("consumer name held by another process, not reading: stage %s", strings.Join(held, ", "))
}

// keepBacklogs creates, without ClickHouse, the groups of the ClickHouse
// appends so their backlog waits; on the embedded Redis it keeps none.
func (a *app) keepBacklogs(ctx context.Context) error {
	if a.ch != nil {
		return nil
	}
	if a.embedded != nil {
		a.log.Info("embedded Redis without ClickHouse: the ClickHouse appends are off and keep no backlog")
		return nil
	}
	idle := 0
	for _, f := range a.flows {
		for _, h := range f.desc.History {
			for _, g := range h.Groups {
				if err := stream.EnsureGroups(ctx, a.rdb, g.Topic, g.Name); err != nil {
					return fmt.Errorf("flow %s: %w", f.def.Name, err)
				}
				idle++
			}
		}
	}
	if idle > 0 {
		a.log.Warn("DROPSTREAM_CLICKHOUSE_DSN is empty: the ClickHouse appends stay idle and their backlog waits in the streams", "groups", idle)
	}
	return nil
}
