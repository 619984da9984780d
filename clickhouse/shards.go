package clickhouse

import (
	"context"
	"fmt"
	"regexp"
)

// reDistributed reads the cluster name of a Distributed engine clause.
var reDistributed = regexp.MustCompile(`^Distributed\(\s*'?([A-Za-z_][A-Za-z0-9_]*)'?\s*,`)

// SchemaCluster returns the cluster MigrateCluster created the schema for,
// or "" for a single server's.
func SchemaCluster(ctx context.Context, c *Client) (string, error) {
	engines, err := QueryRows(ctx, c, "engine of "+TableTransitions, `SELECT engine_full FROM system.tables
WHERE database = currentDatabase() AND name = ? AND engine = 'Distributed'`, []any{TableTransitions}, scanOne[string])
	if err != nil || len(engines) == 0 || engines[len(engines)-1] == "" {
		return "", err
	}
	engine := engines[len(engines)-1]
	m := reDistributed.FindStringSubmatch(engine)
	if m == nil {
		return "", fmt.Errorf("clickhouse: %s is Distributed, but its cluster cannot be read from %q", TableTransitions, engine)
	}
	return m[1], nil
}

// onEveryShard runs fn on c's server (shard ""), or in cluster mode on
// every server in turn (dsns, else system.clusters), stopping at the first
// error.
func onEveryShard(ctx context.Context, c *Client, dsns []string, fn func(shard string, sc *Client) error) error {
	cluster, err := SchemaCluster(ctx, c)
	if err != nil {
		return err
	}
	if cluster == "" {
		if len(dsns) > 0 {
			return fmt.Errorf("clickhouse: shard DSNs given, but the schema is not in cluster mode")
		}
		return fn("", c)
	}
	if len(dsns) == 0 {
		if c.dsn == "" {
			return fmt.Errorf("clickhouse: cluster mode needs the shards' DSNs: the client was not opened with a DSN")
		}
		if dsns, err = clusterDSNs(ctx, c.dsn, cluster); err != nil {
			return err
		}
	}
	for _, dsn := range dsns {
		sc, err := Open(ctx, Config{DSN: dsn})
		if err != nil {
			return fmt.Errorf("clickhouse: shard %s: %w", dsnHost(dsn), err)
		}
		err = fn(dsnHost(dsn), sc)
		_ = sc.Close()
		if err != nil {
			return fmt.Errorf("clickhouse: shard %s: %w", dsnHost(dsn), err)
		}
	}
	return nil
}
