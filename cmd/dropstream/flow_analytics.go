package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/clickhouse"
)

// retentionService names the loop that enforces ClickHouse retention
// inside `run` (selectable with --stages like a stage).
const retentionService = "analytics-retention"

// defaultRetentionInterval is how often `run` enforces retention when
// DROPSTREAM_RETENTION_INTERVAL is unset.
const defaultRetentionInterval = time.Hour

func init() { registerFlow(buildAnalytics) }

// buildAnalytics wires the analytics of ClickHouse into the binary: the
// stats API over the rollups and the retention service. Without ClickHouse
// it adds nothing.
func buildAnalytics(_ context.Context, a *app) (*flow, error) {
	f := &flow{name: "analytics"}
	if a.ch == nil {
		return f, nil
	}
	cfg, err := retentionFromEnv()
	if err != nil {
		return nil, fmt.Errorf("analytics: %w", err)
	}
	interval := defaultRetentionInterval
	if s, ok := os.LookupEnv("DROPSTREAM_RETENTION_INTERVAL"); ok {
		if interval, err = time.ParseDuration(s); err != nil || interval < 0 {
			return nil, fmt.Errorf("analytics: DROPSTREAM_RETENTION_INTERVAL=%q: want a duration (0 disables)", s)
		}
	}
	ch := a.ch
	f.routes = func(srv *api.Server) { api.StatsRoutes{ClickHouse: ch}.Register(srv) }
	if interval > 0 {
		f.services = map[string]func(context.Context) error{
			retentionService: func(ctx context.Context) error { return retentionLoop(ctx, a, ch, cfg, interval) },
		}
	}
	return f, nil
}

// retentionLoop enforces retention at once and then every interval until
// ctx ends. A failed round is logged and retried at the next tick: it never
// stops the process.
func retentionLoop(ctx context.Context, a *app, ch *clickhouse.Client, cfg clickhouse.RetentionConfig, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		dropped, err := clickhouse.EnforceRetention(ctx, ch, cfg)
		for _, d := range dropped {
			a.log.Info("retention dropped a partition", "shard", d.Shard, "table", d.Table, "partition", d.PartitionID, "rows_before", d.End)
		}
		if err != nil && ctx.Err() == nil {
			a.log.Error("retention failed; retrying at the next interval", "err", err, "interval", interval)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
