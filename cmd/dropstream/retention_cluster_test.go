package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/internal/testenv"
)

// TestRetentionAndRebuild_clusterActOnEveryShard: on a schema created with
// `migrate --cluster` over two shards, rows inserted through the
// Distributed tables with a plain DSN are counted at once (the client
// inserts synchronously), `rollups rebuild` and `retention` given the DSN
// of one server act on the local tables of both, and say so per shard.
func TestRetentionAndRebuild_clusterActOnEveryShard(t *testing.T) {
	clearEnv(t)
	ctx := context.Background()
	cl := testenv.StartClickHouseCluster(t, testenv.ClickHouseClusterConfig{})
	dsns := cl.Database(t)
	var out, errOut bytes.Buffer
	if err := dispatch(ctx, []string{"migrate", "--clickhouse-dsn", dsns[0], "--cluster", cl.Name}, &out, &errOut); err != nil {
		t.Fatalf("migrate --cluster: %v\n%s%s", err, out.String(), errOut.String())
	}
	ch, err := clickhouse.Open(ctx, clickhouse.Config{DSN: dsns[0]})
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	const entities = 40
	old := time.Date(2024, 1, 5, 12, 0, 0, 0, time.UTC)
	var rows []clickhouse.TransitionRow
	for i := range entities {
		key := fmt.Sprintf("resy|v%d|2024-01-06|19:00|2", i)
		rows = append(rows, clickhouse.TransitionRow{EventID: fmt.Sprintf("ev-%d", i), RunID: "run-1", RunAt: old, Kind: "open", Raw: true,
			Stable: true, EntityKey: key, EntityKind: "slot", Provider: "resy", Venue: fmt.Sprintf("v%d", i), Date: "2024-01-06",
			SlotTime: "19:00", PartySize: 2, ScopeKey: "s", SourceID: "src", LastSeen: old})
	}
	if err := clickhouse.InsertTransitions(ctx, ch, rows); err != nil {
		t.Fatal(err)
	}
	if n, err := clickhouse.CountTransitions(ctx, ch, clickhouse.Filter{}); err != nil || n != entities {
		t.Fatalf("transitions through the Distributed table right after the insert: %d, %v; want %d", n, err, entities)
	}
	local := func(i int, table string) uint64 {
		t.Helper()
		c, err := clickhouse.Open(ctx, clickhouse.Config{DSN: dsns[i]})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var n uint64
		if err := c.Conn().QueryRow(ctx, "SELECT count() FROM "+table+clickhouse.LocalSuffix).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for i := range cl.Shards() {
		if local(i, clickhouse.TableTransitions) == 0 {
			t.Fatalf("shard %d holds no transition: the test needs rows on both", i)
		}
	}

	out.Reset()
	if err := dispatch(ctx, []string{"rollups", "rebuild", "--clickhouse-dsn", dsns[0]}, &out, &errOut); err != nil {
		t.Fatalf("rollups rebuild: %v\n%s", err, out.String())
	}
	for i := range cl.Shards() {
		if !strings.Contains(out.String(), cl.Addr(i)+": rebuilt ") {
			t.Errorf("rebuild output names no rebuild on %s:\n%s", cl.Addr(i), out.String())
		}
	}

	out.Reset()
	if err := dispatch(ctx, []string{"retention", "--clickhouse-dsn", dsns[0]}, &out, &errOut); err != nil {
		t.Fatalf("retention: %v\n%s", err, out.String())
	}
	for i := range cl.Shards() {
		if want := "dropped transitions_local partition 202401 on " + cl.Addr(i); !strings.Contains(out.String(), want) {
			t.Errorf("retention output lacks %q:\n%s", want, out.String())
		}
		if n := local(i, clickhouse.TableTransitions); n != 0 {
			t.Errorf("shard %d: %d transitions left after retention, want 0", i, n)
		}
	}
	if n, err := clickhouse.CountTransitions(ctx, ch, clickhouse.Filter{}); err != nil || n != 0 {
		t.Errorf("transitions through the Distributed table after retention: %d, %v; want 0", n, err)
	}
}
