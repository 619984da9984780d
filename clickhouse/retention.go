package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/dropstream/dropstream/internal/settings"
	"github.com/dropstream/dropstream/internal/tick"
)

// RetentionConfig says how long each table keeps its rows: a partition goes
// when all of it is older than the period. Zero fields take the defaults; a
// negative period keeps the table forever.
type RetentionConfig struct {
	// Runs is the period of the raw runs table. Default 7 days.
	Runs time.Duration `default:"168h"`
	// Transitions is the period of the raw transitions table. Default 30
	// days.
	Transitions time.Duration `default:"720h"`
	// Sessions is the period of the sessions table. Default 2 years.
	Sessions time.Duration `default:"17520h"`
	// Rollups is the period of every rollup table (RollupTables). Default 2
	// years.
	Rollups time.Duration `default:"17520h"`
	// Tables sets the period of other tables partitioned by toYYYYMM or
	// toYYYYMMDD, by name.
	Tables map[string]time.Duration
	// DryRun lists the partitions that would go without dropping them.
	DryRun bool
	// Shards are the DSNs of every server in cluster mode. Default: the
	// hosts system.clusters lists.
	Shards []string
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Progress, when set, is called after each table of each server is done.
	Progress func(table string)
}

// WithDefaults returns c with zero fields set to their defaults.
func (c RetentionConfig) WithDefaults() RetentionConfig {
	settings.Defaults(&c)
	c.Now = tick.Or(c.Now)
	return c
}

// Validate checks the table names of Tables.
func (c RetentionConfig) Validate() error {
	var errs []error
	if len(c.Shards) > 256 {
		errs = append(errs, fmt.Errorf("clickhouse: retention: %d shard DSNs, at most 256", len(c.Shards)))
	}
	for t := range c.Tables {
		if !identRe.MatchString(t) {
			errs = append(errs, fmt.Errorf("clickhouse: retention: table name %q is not an identifier", t))
		}
	}
	return errors.Join(errs...)
}

// periods returns the period of every table retention covers.
func (c RetentionConfig) periods() (map[string]time.Duration, error) {
	p := map[string]time.Duration{TableRuns: c.Runs, TableTransitions: c.Transitions, TableSessions: c.Sessions}
	rollups, err := RollupTables()
	if err != nil {
		return nil, err
	}
	for _, t := range rollups {
		p[t] = c.Rollups
	}
	maps.Copy(p, c.Tables)
	return p, nil
}

// DroppedPartition is one partition removed (or, in a dry run, that would
// be removed) by EnforceRetention.
type DroppedPartition struct {
	// Shard is the server's host:port in cluster mode, else "".
	Shard       string
	Table       string
	PartitionID string
	// End is the end of the partition's span (UTC); every row is older.
	End time.Time
}

// EnforceRetention drops the day or month partitions older than each
// table's period and returns them by table and partition (with an error,
// those dropped so far). In cluster mode it drops them from the local
// tables of every server.
func EnforceRetention(ctx context.Context, c *Client, cfg RetentionConfig) ([]DroppedPartition, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	periods, err := cfg.periods()
	if err != nil {
		return nil, err
	}
	var dropped []DroppedPartition
	err = onEveryShard(ctx, c, cfg.Shards, func(shard string, sc *Client) error {
		d, err := enforceRetention(ctx, sc, cfg, periods, shard)
		dropped = append(dropped, d...)
		return err
	})
	return dropped, err
}

// enforceRetention is EnforceRetention on the server of c.
func enforceRetention(ctx context.Context, c *Client, cfg RetentionConfig, periods map[string]time.Duration, shard string) ([]DroppedPartition, error) {
	now := cfg.Now().UTC()
	var dropped []DroppedPartition
	for _, t := range slices.Sorted(maps.Keys(periods)) {
		if periods[t] < 0 {
			continue
		}
		cutoff := now.Add(-periods[t])
		local, ids, err := partitionIDs(ctx, c, t)
		if err != nil {
			return dropped, err
		}
		for _, id := range ids {
			_, end, err := partitionSpan(id)
			if err != nil || end.After(cutoff) {
				continue
			}
			if !cfg.DryRun {
				if err := c.conn.Exec(ctx, fmt.Sprintf("ALTER TABLE %s DROP PARTITION ID '%s'", local, id)); err != nil {
					return dropped, fmt.Errorf("clickhouse: retention: drop %s partition %s: %w", local, id, err)
				}
			}
			dropped = append(dropped, DroppedPartition{Shard: shard, Table: local, PartitionID: id, End: end})
		}
		if cfg.Progress != nil {
			cfg.Progress(local)
		}
	}
	return dropped, nil
}
