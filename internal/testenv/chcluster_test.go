package testenv

import (
	"testing"

	ch "github.com/ClickHouse/clickhouse-go/v2"
)

func TestStartClickHouseCluster_shardsKnowTheCluster(t *testing.T) {
	c := StartClickHouseCluster(t, ClickHouseClusterConfig{})
	dsns := c.Database(t)
	if len(dsns) != 2 {
		t.Fatalf("%d DSNs, want 2", len(dsns))
	}
	for i, dsn := range dsns {
		opts, err := ch.ParseDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		conn := openCH(t, opts)
		var n uint64
		if err := conn.QueryRow(t.Context(), "SELECT count() FROM system.clusters WHERE cluster = ?", c.Name).Scan(&n); err != nil {
			t.Fatalf("shard %d: %v", i, err)
		}
		if n != 2 {
			t.Errorf("shard %d lists %d hosts in cluster %s, want 2", i, n, c.Name)
		}
		var db string
		if err := conn.QueryRow(t.Context(), "SELECT currentDatabase()").Scan(&db); err != nil || db != opts.Auth.Database {
			t.Errorf("shard %d: current database %q (%v), want %q", i, db, err, opts.Auth.Database)
		}
	}
}
