package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"testing"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/internal/testenv"
)

// TestMigrate_clusterCreatesLocalAndDistributedTablesOnEveryShard runs
// `dropstream migrate --cluster` against two clickhouse-server shards: every
// table of the schema exists on both as a local MergeTree table plus a
// Distributed table of the plain name, and a second run applies nothing.
func TestMigrate_clusterCreatesLocalAndDistributedTablesOnEveryShard(t *testing.T) {
	clearEnv(t)
	cl := testenv.StartClickHouseCluster(t, testenv.ClickHouseClusterConfig{})
	dsns := cl.Database(t)
	var out, errOut bytes.Buffer
	args := []string{"migrate", "--clickhouse-dsn", dsns[0], "--cluster", cl.Name}
	if err := dispatch(context.Background(), args, &out, &errOut); err != nil {
		t.Fatalf("migrate --cluster: %v\n%s%s", err, out.String(), errOut.String())
	}
	for i := range cl.Shards() {
		if !strings.Contains(out.String(), cl.Addr(i)+": applied 0001") {
			t.Errorf("no progress for shard %s in:\n%s", cl.Addr(i), out.String())
		}
	}
	for i, dsn := range dsns {
		c, err := clickhouse.Open(context.Background(), clickhouse.Config{DSN: dsn})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for _, table := range []string{clickhouse.TableRuns, clickhouse.TableTransitions, clickhouse.TableSessions} {
			var engine, local string
			q := "SELECT anyIf(engine, name = ?), anyIf(engine, name = ?) FROM system.tables WHERE database = currentDatabase()"
			if err := c.Conn().QueryRow(context.Background(), q, table, table+clickhouse.LocalSuffix).Scan(&engine, &local); err != nil {
				t.Fatal(err)
			}
			if engine != "Distributed" || !strings.HasSuffix(local, "MergeTree") {
				t.Errorf("shard %d: %s is %q over a %q local table, want Distributed over a MergeTree", i, table, engine, local)
			}
		}
	}
	out.Reset()
	args = append(args, "--shard-dsns", strings.Join(dsns, ","))
	if err := dispatch(context.Background(), args, &out, &errOut); err != nil {
		t.Fatalf("second migrate --cluster: %v", err)
	}
	if !strings.Contains(out.String(), "schema up to date on 2 server(s) of cluster "+cl.Name+": 0 migration(s) applied") {
		t.Errorf("second migrate printed %q, want nothing applied on 2 servers", out.String())
	}
}

func TestMigrate_clusterFlags(t *testing.T) {
	clearEnv(t)
	var out, errOut bytes.Buffer
	err := dispatch(context.Background(), []string{"migrate", "--clickhouse-dsn", "clickhouse://127.0.0.1:1/db", "--shard-dsns", "clickhouse://127.0.0.1:2/db"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "--shard-dsns needs --cluster") {
		t.Errorf("--shard-dsns alone: %v, want an error naming --cluster", err)
	}
	err = dispatch(context.Background(), []string{"migrate", "--clickhouse-dsn", "clickhouse://127.0.0.1:1/db", "--cluster", "bad name"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "cluster name") {
		t.Errorf("bad cluster name: %v, want an error about the name", err)
	}
	errOut.Reset()
	if err := dispatch(context.Background(), []string{"migrate", "--help"}, &out, &errOut); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("migrate --help: %v", err)
	}
	help := flagHelp(errOut.String())
	for name, env := range map[string]string{"cluster": "DROPSTREAM_CLICKHOUSE_CLUSTER", "shard-dsns": "DROPSTREAM_CLICKHOUSE_SHARD_DSNS"} {
		if !strings.Contains(help[name], "["+env+"]") {
			t.Errorf("help of --%s = %q, want it to name %s", name, help[name], env)
		}
	}
}
