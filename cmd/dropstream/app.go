package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/flows/sample"
	dsotel "github.com/dropstream/dropstream/otel"
	"github.com/dropstream/dropstream/stream"
)

// app is the wired process: telemetry, Redis, optional ClickHouse, API and
// the stage registry.
type app struct {
	cfg      Config
	log      *slog.Logger
	otel     *dsotel.Providers
	tel      stream.Telemetry
	rdb      redis.UniversalClient
	embedded *stream.Embedded
	ch       *clickhouse.Client
	pub      *stream.Publisher
	av       *availability
	// flows are the domain flows of flowBuilders, built by stages().
	flows      []*flow
	flowsBuilt bool
	closers    []func()
}

// newApp connects everything the configuration names. With no Redis URL it
// starts an embedded Redis and says so.
func newApp(ctx context.Context, cfg Config, stderr io.Writer) (*app, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	level, _ := parseLevel(cfg.LogLevel)
	logger := dsotel.NewLogger(stderr, dsotel.LogConfig{Format: cfg.LogFormat, Level: level})
	slog.SetDefault(logger)
	a := &app{cfg: cfg, log: logger}
	prov, err := dsotel.Setup(ctx, dsotel.Config{Embedded: cfg.RedisURL == ""})
	if err != nil {
		return nil, err
	}
	prov.SetGlobal()
	a.otel = prov
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
			a.close()
			return nil, err
		}
		a.embedded = emb
		a.closers = append(a.closers, emb.Close)
		url = emb.URL()
		logger.Warn("DROPSTREAM_REDIS_URL is empty: using an embedded in-process Redis; nothing survives a restart",
			"addr", strings.TrimPrefix(url, "redis://"))
	}
	rdb, err := stream.Dial(ctx, url)
	if err != nil {
		a.close()
		return nil, err
	}
	a.rdb = rdb
	a.closers = append(a.closers, func() { _ = rdb.Close() })
	if cfg.ClickHouseDSN != "" {
		ch, err := clickhouse.Open(ctx, clickhouse.Config{DSN: cfg.ClickHouseDSN})
		if err != nil {
			a.close()
			return nil, err
		}
		a.ch = ch
		a.closers = append(a.closers, func() { _ = ch.Close() })
	}
	a.pub = stream.NewPublisher(rdb, a.tel)
	return a, nil
}

// close releases everything, last opened first.
func (a *app) close() {
	for i := len(a.closers) - 1; i >= 0; i-- {
		a.closers[i]()
	}
	a.closers = nil
}

// apiServer builds the API with its readiness checks.
func (a *app) apiServer() (*api.Server, error) {
	checks := []api.ReadinessCheck{{Name: "redis", Check: func(ctx context.Context) error { return a.rdb.Ping(ctx).Err() }}}
	if a.ch != nil {
		checks = append(checks, api.ReadinessCheck{Name: "clickhouse", Check: a.ch.Ping})
	}
	srv, err := api.New(api.Config{
		Addr:           a.cfg.APIAddr,
		APIKeys:        a.cfg.APIKeys,
		Logger:         a.log,
		TracerProvider: a.otel.TracerProvider,
		MeterProvider:  a.otel.MeterProvider,
		MetricsHandler: a.otel.MetricsHandler(),
		Checks:         checks,
	})
	if err != nil {
		return nil, err
	}
	if a.av != nil {
		a.av.routes(srv)
	}
	for _, f := range a.flows {
		if f.routes != nil {
			f.routes(srv)
		}
	}
	return srv, nil
}

// stages returns every stage the binary knows, by name.
func (a *app) stages() (map[string]stream.Stage, error) {
	all := map[string]stream.Stage{}
	sampleStages, err := sample.Stages(a.rdb, a.pub, a.cfg.Partitions)
	if err != nil {
		return nil, err
	}
	for _, s := range sampleStages {
		all[s.Name] = s
	}
	if a.av == nil {
		av, err := a.newAvailability()
		if err != nil {
			return nil, err
		}
		a.av = av
	}
	for _, s := range a.av.stages {
		all[s.Name] = s
	}
	if err := a.buildFlows(context.Background()); err != nil {
		return nil, err
	}
	for _, f := range a.flows {
		for _, s := range f.stages {
			if _, dup := all[s.Name]; dup {
				return nil, fmt.Errorf("flow %s: stage %q defined twice", f.name, s.Name)
			}
			all[s.Name] = s
		}
	}
	return all, nil
}

// services are the named loops that run beside the stages.
func (a *app) services() map[string]func(context.Context) error {
	all := map[string]func(context.Context) error{collectorStage: a.av.collector.Run}
	for _, f := range a.flows {
		for n, run := range f.services {
			all[n] = run
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
	out := make([]stream.Topic, 0, len(seen))
	for _, t := range seen {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

// pick selects stages and services by a comma list of names; empty or
// "all" is every one.
func pick(all map[string]stream.Stage, services map[string]func(context.Context) error, names string) ([]stream.Stage, []string, error) {
	known := make([]string, 0, len(all)+len(services))
	for n := range all {
		known = append(known, n)
	}
	for n := range services {
		known = append(known, n)
	}
	slices.Sort(known)
	var stages []stream.Stage
	var svcs []string
	want := known
	if names != "" && names != "all" {
		want = nil
		for _, n := range strings.Split(names, ",") {
			want = append(want, strings.TrimSpace(n))
		}
	}
	for _, n := range want {
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

// runStages starts copies of each stage, each until ctx ends. A copy that
// fails (it cannot create its consumer groups, say) sends its error on the
// returned channel; callers stop the process with it.
func (a *app) runStages(ctx context.Context, wg *sync.WaitGroup, stages []stream.Stage, copies int) ([]*stream.Runner, chan error, error) {
	var runners []*stream.Runner
	for _, s := range stages {
		for i := 0; i < copies; i++ {
			r, err := stream.NewRunner(a.rdb, s, a.tel)
			if err != nil {
				return nil, nil, err
			}
			runners = append(runners, r)
		}
	}
	failed := make(chan error, len(runners)+8)
	for _, r := range runners {
		wg.Go(func() {
			if err := r.Run(ctx); err != nil {
				failed <- fmt.Errorf("stage %s: %w", r.Info().Stage, err)
			}
		})
	}
	return runners, failed, nil
}

// runServices starts the named services; one that fails sends its error on
// failed.
func (a *app) runServices(ctx context.Context, wg *sync.WaitGroup, names []string, failed chan<- error) {
	all := a.services()
	for _, n := range names {
		run := all[n]
		wg.Go(func() {
			if err := run(ctx); err != nil && ctx.Err() == nil {
				failed <- fmt.Errorf("%s: %w", n, err)
			}
		})
	}
}
