package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/internal/progress"
)

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg Config
	var cluster, shards string
	fs := flagSet("migrate", "Creates or upgrades the ClickHouse schema (embedded, versioned .sql files), showing progress.\n"+
		"With --cluster NAME it creates, on every server of that cluster (remote_servers), local tables\n"+
		"plus Distributed tables of the plain names over them, sharded by entity; no ON CLUSTER DDL or\n"+
		"ZooKeeper is needed. Writers should add insert_distributed_sync=1 to their DSN.", stderr, &cfg, "json")
	envString(fs, &cluster, "cluster", "DROPSTREAM_CLICKHOUSE_CLUSTER", "", "ClickHouse cluster name (remote_servers) to create the schema on; empty: the server of the DSN alone")
	shardDSNsFlag(fs, &shards)
	if err := fs.parse(args); err != nil {
		return err
	}
	if cfg.ClickHouseDSN == "" {
		return errors.New("migrate needs DROPSTREAM_CLICKHOUSE_DSN or --clickhouse-dsn")
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cluster != "" {
		return migrateCluster(ctx, cfg.ClickHouseDSN, cluster, shards, stdout)
	}
	if shards != "" {
		return errors.New("migrate: --shard-dsns needs --cluster")
	}
	ch, err := clickhouse.Open(ctx, clickhouse.Config{DSN: cfg.ClickHouseDSN})
	if err != nil {
		return err
	}
	defer ch.Close()
	all, err := clickhouse.Migrations()
	if err != nil {
		return err
	}
	// The bar stands at the last migration applied, in version order.
	position := map[string]int64{}
	for i, m := range all {
		position[m.Name] = int64(i + 1)
	}
	ph := progress.New(stderr).Start("migrate", int64(len(all)))
	applied, err := clickhouse.Migrate(ctx, ch, func(line string) {
		fmt.Fprintln(stdout, line)
		if rest, ok := strings.CutPrefix(line, "applied "); ok {
			name, _, _ := strings.Cut(rest, " ")
			ph.Set(position[name])
		}
	})
	if err != nil {
		return err
	}
	ph.Set(int64(len(all)))
	ph.Done(fmt.Sprintf("%d applied now", len(applied)))
	fmt.Fprintf(stdout, "schema up to date: %d migration(s) applied\n", len(applied))
	return nil
}

// shardDSNsFlag declares --shard-dsns (DROPSTREAM_CLICKHOUSE_SHARD_DSNS),
// read by migrate --cluster, retention and rollups rebuild.
func shardDSNsFlag(fs *flags, dst *string) {
	envString(fs, dst, "shard-dsns", "DROPSTREAM_CLICKHOUSE_SHARD_DSNS", "",
		"cluster mode: comma-separated DSNs of every server of the cluster; empty: the hosts system.clusters lists, with the DSN's credentials and database")
}

func migrateCluster(ctx context.Context, dsn, cluster, shards string, stdout io.Writer) error {
	cfg := clickhouse.ClusterConfig{Name: cluster, Shards: splitList(shards)}
	res, err := clickhouse.MigrateCluster(ctx, dsn, cfg, func(line string) { fmt.Fprintln(stdout, line) })
	if err != nil {
		return err
	}
	n := 0
	for _, r := range res {
		n += len(r.Applied)
	}
	fmt.Fprintf(stdout, "schema up to date on %d server(s) of cluster %s: %d migration(s) applied\n", len(res), cluster, n)
	return nil
}
