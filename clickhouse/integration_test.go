package clickhouse_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/internal/testenv"
)

func open(t testing.TB) *clickhouse.Client {
	t.Helper()
	dsn := testenv.ClickHouseDSN(t)
	c, err := clickhouse.Open(t.Context(), clickhouse.Config{DSN: dsn})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

func TestClient_pingAndServerVersion(t *testing.T) {
	c := open(t)
	ctx := t.Context()
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	v, err := c.ServerVersion(ctx)
	if err != nil {
		t.Fatalf("ServerVersion: %v", err)
	}
	if v == "" || !strings.Contains(v, ".") {
		t.Fatalf("ServerVersion() = %q, want a dotted version", v)
	}
	t.Logf("server version %s", v)
}

func TestClient_batchInsertIntoPartitionedMergeTree(t *testing.T) {
	tests := []struct {
		name   string
		rows   int
		months int // rows are spread over this many monthly partitions
	}{
		{name: "one row", rows: 1, months: 1},
		{name: "thousand rows over three months", rows: 1000, months: 3},
		{name: "hundred thousand rows over twelve months", rows: 100_000, months: 12},
	}
	c := open(t)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			table := fmt.Sprintf("events_%d", i)
			ddl := `CREATE TABLE ` + table + ` (
				a UInt64,
				b String,
				ts DateTime
			) ENGINE = MergeTree()
			PARTITION BY toYYYYMM(ts)
			ORDER BY (a, ts)`
			if err := c.Conn().Exec(ctx, ddl); err != nil {
				t.Fatalf("create table: %v", err)
			}
			batch, err := c.Conn().PrepareBatch(ctx, "INSERT INTO "+table+" (a, b, ts)")
			if err != nil {
				t.Fatalf("PrepareBatch: %v", err)
			}
			start := time.Date(2024, 1, 15, 12, 0, 0, 0, time.UTC)
			for r := range tt.rows {
				ts := start.AddDate(0, r%tt.months, 0)
				if err := batch.Append(uint64(r), fmt.Sprintf("row-%d", r), ts); err != nil {
					t.Fatalf("Append row %d: %v", r, err)
				}
			}
			if err := batch.Send(); err != nil {
				t.Fatalf("Send: %v", err)
			}

			var n uint64
			if err := c.Conn().QueryRow(ctx, "SELECT count() FROM "+table).Scan(&n); err != nil {
				t.Fatalf("count: %v", err)
			}
			if n != uint64(tt.rows) {
				t.Fatalf("count() = %d, want %d", n, tt.rows)
			}
			var parts uint64
			q := "SELECT uniqExact(partition) FROM system.parts WHERE database = currentDatabase() AND table = ? AND active"
			if err := c.Conn().QueryRow(ctx, q, table).Scan(&parts); err != nil {
				t.Fatalf("count partitions: %v", err)
			}
			if parts != uint64(tt.months) {
				t.Fatalf("partitions = %d, want %d", parts, tt.months)
			}
		})
	}
}

func TestOpen_honoursContext(t *testing.T) {
	dsn := testenv.ClickHouseDSN(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c, err := clickhouse.Open(ctx, clickhouse.Config{DSN: dsn})
	if err == nil {
		c.Close()
		t.Fatal("Open with a cancelled context succeeded")
	}
}
