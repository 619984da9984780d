package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/internal/tick"
)

// retentionService names the loop that enforces ClickHouse retention
// inside `run` (selectable with --stages like a stage).
const retentionService = "analytics-retention"

// defaultRetentionInterval is how often `run` enforces retention when
// DROPSTREAM_RETENTION_INTERVAL is unset.
const defaultRetentionInterval = time.Hour

// appServices are the services of the app itself, beside the flows': the
// retention of ClickHouse partitions, with ClickHouse.
func (a *app) appServices() map[string]func(context.Context) error {
	all := map[string]func(context.Context) error{}
	if a.ch == nil || a.retentionInterval <= 0 {
		return all
	}
	ch, cfg, interval := a.ch, a.retention, a.retentionInterval
	all[retentionService] = func(ctx context.Context) error { return retentionLoop(ctx, a, ch, cfg, interval) }
	return all
}

// readRetention reads the retention periods and DROPSTREAM_RETENTION_INTERVAL.
func (a *app) readRetention() error {
	cfg, err := retentionFromEnv()
	if err != nil {
		return fmt.Errorf("analytics: %w", err)
	}
	interval := defaultRetentionInterval
	if s, ok := os.LookupEnv("DROPSTREAM_RETENTION_INTERVAL"); ok {
		if interval, err = time.ParseDuration(s); err != nil || interval < 0 {
			return fmt.Errorf("analytics: DROPSTREAM_RETENTION_INTERVAL=%q: want a duration (0 disables)", s)
		}
	}
	a.retention, a.retentionInterval = cfg, interval
	return nil
}

// retentionLoop enforces retention at once and then every interval until
// ctx ends. A failed round is logged and retried at the next tick: it never
// stops the process.
func retentionLoop(ctx context.Context, a *app, ch *clickhouse.Client, cfg clickhouse.RetentionConfig, interval time.Duration) error {
	tick.Every(ctx, interval, func() {
		dropped, err := clickhouse.EnforceRetention(ctx, ch, cfg)
		for _, d := range dropped {
			a.log.Info("retention dropped a partition", "shard", d.Shard, "table", d.Table, "partition", d.PartitionID, "rows_before", d.End)
		}
		if err != nil && ctx.Err() == nil {
			a.log.Error("retention failed; retrying at the next interval", "err", err, "interval", interval)
		}
	})
	return nil
}
