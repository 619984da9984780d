package main

import (
	"context"
	"fmt"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/collector"
	"github.com/dropstream/dropstream/diff"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/throttle"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer"
)

// collectorStage names the collector's polling loop among the stages.
const collectorStage = "avail-collector"

// availability is the wired availability pipeline.
type availability struct {
	topics     avail.Topics
	sources    *collector.Store
	collector  *collector.Collector
	projection *writer.Projection
	analytics  *writer.Analytics // nil without ClickHouse
	watchers   *notifier.WatcherStore
	stages     []stream.Stage
	// idle are the groups of the analytics stages when there is no
	// ClickHouse: they exist so their backlog is kept.
	idle []idleGroup
}

// idleGroup is a consumer group created but not consumed.
type idleGroup struct {
	topic stream.Topic
	group string
}

// newAvailability builds the pipeline's parts over the app's Redis (and
// ClickHouse, when configured).
func (a *app) newAvailability() (*availability, error) {
	topics := avail.NewTopics(a.cfg.Partitions)
	av := &availability{topics: topics, sources: collector.NewStore(a.rdb)}
	col, err := collector.NewCollector(topics, a.pub, collector.CollectorConfig{Store: av.sources, Shared: a.rdb})
	if err != nil {
		return nil, fmt.Errorf("collector: %w", err)
	}
	av.collector = col
	a.closers = append(a.closers, func() { _ = col.Close() })
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
	hist, err := newHistoryRecorder(a)
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
	if a.ch == nil {
		av.idle = []idleGroup{{topics.Transitions, writer.StageAnalyticsTransitions}, {topics.Runs, writer.StageAnalyticsRuns}}
		return av, nil
	}
	analytics, err := writer.NewAnalytics(a.ch, writer.AnalyticsConfig{Partitions: a.cfg.Partitions}, a.tel)
	if err != nil {
		return nil, fmt.Errorf("analytics: %w", err)
	}
	av.analytics = analytics
	a.closers = append(a.closers, func() { _ = analytics.Close() })
	av.stages = append(av.stages, analytics.Stages()...)
	return av, nil
}

// keepBacklogs creates the groups of the idle analytics stages, so their
// backlog waits in the streams until ClickHouse is configured.
func (av *availability) keepBacklogs(ctx context.Context, a *app) error {
	for _, g := range av.idle {
		if err := stream.EnsureGroups(ctx, a.rdb, g.topic, g.group); err != nil {
			return err
		}
	}
	if len(av.idle) > 0 {
		a.log.Warn("DROPSTREAM_CLICKHOUSE_DSN is empty: analytics stages stay idle and their backlog waits in the streams")
	}
	return nil
}

// routes registers the availability API.
func (av *availability) routes(srv *api.Server) {
	api.AvailabilityRoutes{Projection: av.projection}.Register(srv)
	api.SourceRoutes{Store: av.sources, Collector: av.collector}.Register(srv)
	api.WatcherRoutes{Store: av.watchers}.Register(srv)
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
