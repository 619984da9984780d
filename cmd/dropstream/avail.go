package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/collector"
	"github.com/dropstream/dropstream/collector/simulator"
	"github.com/dropstream/dropstream/diff"
	"github.com/dropstream/dropstream/flow"
	availhttp "github.com/dropstream/dropstream/flows/availability/httpapi"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/history"
	"github.com/dropstream/dropstream/notifier/throttle"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer"
)

// collectorStage names the collector's polling loop among the stages.
const collectorStage = "avail-collector"

// availVars are the variables of the availability flow.
var availVars = []flow.Var{
	{Name: "DROPSTREAM_SOURCES_FILE", Usage: "JSON file of availability sources the avail-collector service creates or replaces at start"},
	{Name: "DROPSTREAM_DEMO_VENUES", Kind: flow.Int, Default: "6", Usage: "demo: simulated venues (1..100)"},
	{Name: "DROPSTREAM_DEMO_TICK", Kind: flow.Duration, Default: "2s", Usage: "demo: how often the simulated world changes"},
	{Name: "DROPSTREAM_DEMO_INTERVAL", Kind: flow.Duration, Default: "2s", Usage: "demo: poll interval of the simulated source (at least 1s)"},
	{Name: "DROPSTREAM_DEMO_CHURN", Default: "0.05", Usage: "demo: fraction of slots that flip per tick"},
	{Name: "DROPSTREAM_DEMO_FLAP", Default: "0.02", Usage: "demo: fraction of slots that toggle every tick"},
}

// availability is the wired availability pipeline.
type availability struct {
	topics     avail.Topics
	sources    *collector.Store
	collector  *collector.Collector
	projection *writer.Projection
	watchers   *notifier.WatcherStore
	stages     []stream.Stage
}

// buildAvailability wires the availability pipeline: the collector service,
// the normalizer, diff, projection and watcher stages, the ClickHouse
// appends, the routes and the demo's simulated source.
func buildAvailability(ctx context.Context, a *app) (*cmdFlow, error) {
	av, err := a.newAvailability()
	if err != nil {
		return nil, err
	}
	topics, partitions := av.topics, a.cfg.Partitions
	return &cmdFlow{desc: flow.Description{
		Stages: av.stages,
		Services: []flow.Service{{Name: collectorStage, Run: func(ctx context.Context) error {
			if path := a.settings.String("DROPSTREAM_SOURCES_FILE"); path != "" {
				if err := av.loadSources(ctx, path); err != nil {
					return err
				}
			}
			return av.collector.Run(ctx)
		}}},
		Edges: []flow.Edge{{From: collectorStage, Topic: topics.Raw}, {From: collector.NormalizerStage, Topic: topics.Snapshots},
			{From: diff.StageName, Topic: topics.Transitions}, {From: diff.StageName, Topic: topics.Runs}},
		History: []flow.History{{Tables: []string{"runs", "transitions", "sessions"},
			Groups: []flow.Group{{Topic: topics.Transitions, Name: writer.StageAnalyticsTransitions}, {Topic: topics.Runs, Name: writer.StageAnalyticsRuns}},
			Open: func(_ context.Context, ch *clickhouse.Client) ([]stream.Stage, func() error, error) {
				analytics, err := writer.NewAnalytics(ch, writer.AnalyticsConfig{Partitions: partitions}, a.tel)
				if err != nil {
					return nil, nil, fmt.Errorf("analytics: %w", err)
				}
				return analytics.Stages(), analytics.Close, nil
			}}},
		Demo: func(ctx context.Context) error { return av.demo(ctx, a) },
	}, routes: av.routes, close: func() { _ = av.collector.Close() }}, nil
}

// newAvailability builds the pipeline's parts over the app's Redis.
func (a *app) newAvailability() (*availability, error) {
	topics := avail.NewTopics(a.cfg.Partitions)
	av := &availability{topics: topics, sources: collector.NewStore(a.rdb)}
	col, err := collector.NewCollector(topics, a.pub, collector.CollectorConfig{Store: av.sources, Shared: a.rdb})
	if err != nil {
		return nil, fmt.Errorf("collector: %w", err)
	}
	av.collector = col
	if av.projection, err = writer.NewProjection(a.rdb, writer.ProjectionConfig{Partitions: a.cfg.Partitions}, a.tel); err != nil {
		return nil, fmt.Errorf("projection: %w", err)
	}
	if av.watchers, err = notifier.NewWatcherStore(a.rdb, notifier.StoreConfig{Logger: a.log}); err != nil {
		return nil, fmt.Errorf("watchers: %w", err)
	}
	channels, err := notifier.NewChannels(notifier.WebhookConfig{}, a.log)
	if err != nil {
		return nil, err
	}
	hist, err := history.NewRecorder(a.rdb, a.pub, history.Config{Partitions: a.cfg.Partitions})
	if err != nil {
		return nil, fmt.Errorf("notifier history: %w", err)
	}
	// Watcher sends are not rate limited (a venue's openings arrive in
	// bursts), but a receiver's 429 Retry-After blocks its watcher.
	retryAfter, err := throttle.New(a.rdb, throttle.Config{Disabled: true})
	if err != nil {
		return nil, err
	}
	notify, err := notifier.NewStage(a.rdb, topics, av.watchers, channels, notifier.Config{History: hist, Throttle: retryAfter}, a.tel)
	if err != nil {
		return nil, fmt.Errorf("notifier: %w", err)
	}
	av.stages = []stream.Stage{collector.NewNormalizer(topics, a.pub), diff.NewStage(a.rdb, topics, a.tel), av.projection.Stage(), notify}
	return av, nil
}

// routes registers the availability API.
func (av *availability) routes(srv *api.Server) {
	api.AvailabilityRoutes{Projection: av.projection}.Register(srv)
	api.SourceRoutes{Store: av.sources, Collector: av.collector}.Register(srv)
	availhttp.WatcherRoutes{Store: av.watchers}.Register(srv)
}

// loadSources creates or replaces the sources of a JSON file.
func (av *availability) loadSources(ctx context.Context, path string) error {
	srcs, err := collector.LoadFile(path)
	if err != nil {
		return fmt.Errorf("sources file: %w", err)
	}
	for _, src := range srcs {
		if err := av.sources.Put(ctx, src); err != nil {
			return fmt.Errorf("sources file: %s: %w", src.ID, err)
		}
		if err := av.collector.Upsert(src); err != nil {
			return fmt.Errorf("sources file: %s: %w", src.ID, err)
		}
	}
	return nil
}

// demoSource is the simulated source the demo polls.
const demoSource = "demo-sim"

// demo starts a simulated reservation provider, registers a source polling
// it (every venue, date and party size) and a watcher that logs every
// stable opening.
func (av *availability) demo(ctx context.Context, a *app) error {
	s := a.settings
	churn, err1 := strconv.ParseFloat(s.String("DROPSTREAM_DEMO_CHURN"), 64)
	flap, err2 := strconv.ParseFloat(s.String("DROPSTREAM_DEMO_FLAP"), 64)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("DROPSTREAM_DEMO_CHURN or DROPSTREAM_DEMO_FLAP: %w", err)
	}
	sim, err := simulator.New(simulator.Config{Seed: 1, Venues: s.Int("DROPSTREAM_DEMO_VENUES"), Churn: churn, Flap: flap,
		AutoTick: s.Duration("DROPSTREAM_DEMO_TICK")})
	if err != nil {
		return err
	}
	url, err := sim.Start(ctx, "127.0.0.1:0")
	if err != nil {
		return err
	}
	a.log.Info("demo: simulated reservation provider started", "url", url)
	simCfg := sim.Config()
	src := collector.Source{ID: demoSource, Provider: "simulator", BaseURL: url, Interval: s.Duration("DROPSTREAM_DEMO_INTERVAL"),
		Stabilization: 2, RateLimit: 100}
	for _, v := range sim.Venues() {
		for _, d := range simCfg.Dates {
			for _, p := range simCfg.PartySizes {
				src.Scopes = append(src.Scopes, avail.Scope{Venue: strconv.FormatInt(v.ID, 10), Date: d, PartySize: p})
			}
		}
	}
	if err := src.Validate(); err != nil {
		return fmt.Errorf("demo source: %w", err)
	}
	if err := av.sources.Put(ctx, src); err != nil {
		return err
	}
	if err := av.collector.Upsert(src); err != nil {
		return err
	}
	watchers, _, err := av.watchers.List(ctx, "", 1)
	if err != nil || len(watchers) > 0 {
		return err
	}
	_, err = av.watchers.Create(ctx, notifier.Watcher{Name: "demo: every simulated opening", Provider: "simulator", Channel: "log"})
	return err
}
