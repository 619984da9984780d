// Package avail is the availability flow: the collector polls providers;
// normalizer, diff and projection turn answers into observations,
// transitions and entity state; watchers (package watch) hear of stable
// openings; ClickHouse gets the history. Routes are in httpapi.
package avail

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/collector"
	"github.com/dropstream/dropstream/diff"
	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/flows/avail/watch"
	"github.com/dropstream/dropstream/internal/egress"
	"github.com/dropstream/dropstream/internal/quota"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/throttle"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer"
	"github.com/dropstream/dropstream/writer/flowhistory"
)

// Name is the flow's name and its stages' prefix ("avail").
const Name = avail.Flow

// StageCollector names the collector's polling loop, a service of the flow.
const StageCollector = "avail-collector"

// Topics are the flow's topics: avail.Topics.
type Topics = avail.Topics

// NewTopics returns the flow's topics with the given partition count.
func NewTopics(partitions int) Topics { return avail.NewTopics(partitions) }

// The variables of the flow.
const (
	// VarSourcesFile is the sources JSON loaded at start (`run --sources-file`).
	VarSourcesFile = "DROPSTREAM_SOURCES_FILE"
	// The demo's simulated world (`demo --venues`, --tick, --interval,
	// --churn, --flap).
	VarDemoVenues   = "DROPSTREAM_DEMO_VENUES"
	VarDemoTick     = "DROPSTREAM_DEMO_TICK"
	VarDemoInterval = "DROPSTREAM_DEMO_INTERVAL"
	VarDemoChurn    = "DROPSTREAM_DEMO_CHURN"
	VarDemoFlap     = "DROPSTREAM_DEMO_FLAP"
	// VarQuotaWatchers bounds the watchers each caller (key or address) holds.
	VarQuotaWatchers = "DROPSTREAM_QUOTA_WATCHERS"
	// VarQuotaSources bounds the sources each caller may hold.
	VarQuotaSources = "DROPSTREAM_QUOTA_SOURCES"
	// VarGuardMin and VarGuardShare set the diff's false-close diff.Guard.
	VarGuardMin   = "DROPSTREAM_AVAIL_GUARD_MIN"
	VarGuardShare = "DROPSTREAM_AVAIL_GUARD_SHARE"
	// VarPerVenueK turns the diff's per-venue stabilization on
	// (diff.WithPerVenueK) with k at most its value; unset, the default: off.
	VarPerVenueK = "DROPSTREAM_AVAIL_K_PER_VENUE"
)

// Vars are the variables the flow reads.
var Vars = []flow.Var{
	{Name: VarSourcesFile, Usage: "JSON file of availability sources the avail-collector service creates or replaces at start"},
	{Name: VarDemoVenues, Kind: flow.Int, Default: "6", Usage: "demo: simulated venues (1..100)"},
	{Name: VarDemoTick, Kind: flow.Duration, Default: "2s", Usage: "demo: how often the simulated world changes"},
	{Name: VarDemoInterval, Kind: flow.Duration, Default: "2s", Usage: "demo: poll interval of the simulated source (at least 1s)"},
	{Name: VarDemoChurn, Default: "0.05", Usage: "demo: fraction of slots that flip per tick"},
	{Name: VarDemoFlap, Default: "0.02", Usage: "demo: fraction of slots that toggle every tick"},
	{Name: VarQuotaWatchers, Kind: flow.Int, Default: "1000", Usage: "watchers each API key (each client address on an open API) may hold; beyond it 409 quota_exceeded"},
	{Name: VarGuardMin, Kind: flow.Int, Default: "10", Usage: "a run closing more than this many entities of a scope, and more than DROPSTREAM_AVAIL_GUARD_SHARE of its open ones, is held until the next run confirms it (a blank or blocked page); 0 turns the guard off"},
	{Name: VarGuardShare, Default: "0.5", Usage: "share (0..1) of a scope's open entities a run may close at once before the guard holds it"},
	{Name: VarPerVenueK, Kind: flow.Int, Usage: "unset: every venue's openings stabilize after the source's k runs; N in 1..10: each venue's k is chosen in 1..N from its measured flap rate (steady venues notify after one run, flappy ones wait longer)"},
	{Name: VarQuotaSources, Kind: flow.Int, Default: "100", Usage: "sources each API key (each client address on an open API) may create; beyond it 409 quota_exceeded; 0: no cap"},
	releaseVars[0],
}

// Flow is the availability flow, built over the app's Redis.
type Flow struct {
	topics     Topics
	settings   flow.Settings
	tel        stream.Telemetry
	log        *slog.Logger
	ch         *clickhouse.Client
	sources    *collector.Store
	collector  *collector.Collector
	projection *writer.Projection
	watchers   *watch.Store
	sourceCap  *quota.Quota
	stages     []stream.Stage
	egress     *egress.Policy
	rdb        redis.UniversalClient // read by Events
}

// New builds the flow over d.Redis. The watcher stage needs the notifier
// flow's channels and history; without them the error wraps flow.ErrNotBuilt.
func New(_ context.Context, d flow.Deps) (*Flow, error) {
	nf, err := flow.Find[*notifier.Flow](d.Flows, notifier.Name)
	if err != nil {
		return nil, fmt.Errorf("availability: %w", err)
	}
	f := &Flow{topics: NewTopics(d.Settings.Partitions), settings: d.Settings, tel: d.Telemetry, log: cmp.Or(d.Telemetry.Logger, slog.Default()),
		ch: d.ClickHouse, sources: collector.NewStore(d.Redis), egress: d.Settings.EgressPolicy(), rdb: d.Redis}
	releases, err := releaseConfig(d.Settings, d.ClickHouse)
	if err != nil {
		return nil, err
	}
	if f.collector, err = collector.NewCollector(f.topics, d.Publisher, collector.CollectorConfig{Store: f.sources, Shared: d.Redis,
		Egress: f.egress, Releases: releases}); err != nil {
		return nil, fmt.Errorf("collector: %w", err)
	}
	if f.projection, err = writer.NewProjection(d.Redis, writer.ProjectionConfig{Partitions: d.Settings.Partitions}, d.Telemetry); err != nil {
		return nil, fmt.Errorf("projection: %w", err)
	}
	if f.sourceCap, err = d.Settings.Quota(d.Redis, VarQuotaSources, "sources"); err != nil {
		return nil, err
	}
	if f.watchers, err = watch.NewStore(d.Redis, watch.StoreConfig{Logger: f.log, MaxPerOwner: d.Settings.Int(VarQuotaWatchers)}); err != nil {
		return nil, fmt.Errorf("watchers: %w", err)
	}
	// A watcher's notifications are its tenant's.
	nf.RegisterOwners(func(ctx context.Context, id string) (string, bool, error) {
		w, err := f.watchers.Get(ctx, id)
		if errors.Is(err, watch.ErrNotFound) || errors.Is(err, watch.ErrInvalidWatcher) {
			return "", false, nil
		}
		return w.Owner, err == nil, err
	})
	notify, err := f.watcherStage(d, nf)
	if err != nil {
		return nil, err
	}
	guard, err := guardOf(d.Settings)
	if err != nil {
		return nil, err
	}
	maxK := d.Settings.Int(VarPerVenueK)
	if maxK < 0 || maxK > diff.MaxStabilization {
		return nil, fmt.Errorf("%s=%d: want 1 to %d, or unset (off)", VarPerVenueK, maxK, diff.MaxStabilization)
	}
	f.stages = []stream.Stage{collector.NewNormalizer(f.topics, d.Publisher),
		diff.NewStage(d.Redis, f.topics, d.Telemetry, diff.WithGuard(guard), diff.WithPerVenueK(maxK)),
		f.projection.Stage(), notify}
	return f, nil
}

// guardOf reads the diff's false-close guard from the settings.
func guardOf(s flow.Settings) (diff.Guard, error) {
	g := diff.Guard{Min: s.Int(VarGuardMin)}
	share := cmp.Or(s.String(VarGuardShare), "0.5")
	var err error
	if g.Share, err = strconv.ParseFloat(share, 64); err != nil {
		return diff.Guard{}, fmt.Errorf("%s=%q: want a share in 0..1", VarGuardShare, share)
	}
	if err := g.Validate(); err != nil {
		return diff.Guard{}, fmt.Errorf("%s, %s: %w", VarGuardMin, VarGuardShare, err)
	}
	return g, nil
}

// watcherStage builds the "avail-notifier" stage over the notifier flow's
// channels and history, with a ledger of its own.
func (f *Flow) watcherStage(d flow.Deps, nf *notifier.Flow) (stream.Stage, error) {
	// Watcher sends are not rate limited (a venue's openings arrive in
	// bursts), but a receiver's 429 Retry-After blocks its watcher.
	retryAfter, err := throttle.New(d.Redis, throttle.Config{Disabled: true})
	if err != nil {
		return stream.Stage{}, err
	}
	stage, err := watch.NewStage(d.Redis, f.topics, f.watchers, nf.Channels(), watch.Config{History: nf.History(), Throttle: retryAfter,
		Sources: f.sourceInfo}, d.Telemetry)
	if err != nil {
		return stream.Stage{}, fmt.Errorf("notifier: %w", err)
	}
	return stage, nil
}

// sourceInfo is the watch.SourceLookup over the sources' store.
func (f *Flow) sourceInfo(ctx context.Context, id string) (watch.SourceInfo, error) {
	src, err := f.sources.Get(ctx, id)
	if errors.Is(err, collector.ErrSourceNotFound) {
		return watch.SourceInfo{}, fmt.Errorf("%w: %w", watch.ErrSourceUnknown, err)
	}
	if err != nil {
		return watch.SourceInfo{}, err
	}
	src = src.WithDefaults()
	return watch.SourceInfo{Provider: src.Provider, Scopes: src.Scopes, Interval: src.Interval}, nil
}

// Topics are the flow's topics.
func (f *Flow) Topics() Topics { return f.topics }

// Sources is the store of the collector's sources.
func (f *Flow) Sources() *collector.Store { return f.sources }

// SourceQuota caps sources per caller (DROPSTREAM_QUOTA_SOURCES); nil: none.
func (f *Flow) SourceQuota() *quota.Quota { return f.sourceCap }

// Collector is this process's collector, applying source changes at once.
func (f *Flow) Collector() *collector.Collector { return f.collector }

// Projection is the current state and the sessions of every entity.
func (f *Flow) Projection() *writer.Projection { return f.projection }

// Watchers is the store of the watchers.
func (f *Flow) Watchers() *watch.Store { return f.watchers }

// Egress is the collector's outbound policy; the routes refuse a source or
// watcher URL whose host it denies.
func (f *Flow) Egress() *egress.Policy { return f.egress }

// ClickHouse is the app's ClickHouse (nil: none), read by the statistics.
func (f *Flow) ClickHouse() *clickhouse.Client { return f.ch }

// Describe declares the stages, collector, edges, appends and demo source.
func (f *Flow) Describe() flow.Description {
	topics, partitions, tel := f.topics, f.settings.Partitions, f.tel
	return flow.Description{
		Stages: f.stages,
		Services: []flow.Service{{Name: StageCollector, Run: func(ctx context.Context) error {
			if path := f.settings.String(VarSourcesFile); path != "" {
				if err := f.LoadSources(ctx, path); err != nil {
					return err
				}
			}
			return f.collector.Run(ctx)
		}}},
		Edges: []flow.Edge{{From: StageCollector, Topic: topics.Raw}, {From: collector.NormalizerStage, Topic: topics.Snapshots},
			{From: diff.StageName, Topic: topics.Transitions}, {From: diff.StageName, Topic: topics.Runs}},
		History: []flow.History{{Tables: []string{"runs", "transitions", "sessions"},
			Groups: []flow.Group{{Topic: topics.Transitions, Name: writer.StageAnalyticsTransitions}, {Topic: topics.Runs, Name: writer.StageAnalyticsRuns}},
			Open: func(_ context.Context, ch *clickhouse.Client) ([]stream.Stage, func() error, error) {
				analytics, err := writer.NewAnalytics(ch, writer.AnalyticsConfig{Partitions: partitions}, tel)
				if err != nil {
					return nil, nil, fmt.Errorf("analytics: %w", err)
				}
				return analytics.Stages(), analytics.Close, nil
			}},
			flowhistory.Of(HealthHistoryConfig(topics), stream.Telemetry{Logger: f.log})},
		Demo:   f.demo,
		Events: f.events,
	}
}

// Close stops the collector's pollers.
func (f *Flow) Close() error { return f.collector.Close() }

// LoadSources puts a JSON file's sources (collector.LoadFile) and applies them.
func (f *Flow) LoadSources(ctx context.Context, path string) error {
	srcs, err := collector.LoadFile(path)
	if err != nil {
		return fmt.Errorf("sources file: %w", err)
	}
	for _, src := range srcs {
		if err := f.putSource(ctx, src); err != nil {
			return fmt.Errorf("sources file: %s: %w", src.ID, err)
		}
	}
	return nil
}

// putSource stores a source and applies it to the collector.
func (f *Flow) putSource(ctx context.Context, src collector.Source) error {
	if err := f.sources.Put(ctx, src); err != nil {
		return err
	}
	return f.collector.Upsert(src)
}
