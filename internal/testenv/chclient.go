package testenv

import (
	"context"
	"testing"

	"github.com/dropstream/dropstream/clickhouse"
)

// ClickHouse returns a client of a database of the test's own
// (ClickHouseDSN) with every migration applied, closed when the test ends.
func ClickHouse(t testing.TB) *clickhouse.Client {
	t.Helper()
	return OpenClickHouse(t, ClickHouseDSN(t))
}

// OpenClickHouse returns a client of the database of dsn (one of
// ClickHouseDSN's, when the test also hands it to other processes) with
// every migration applied, closed when the test ends.
func OpenClickHouse(t testing.TB, dsn string) *clickhouse.Client {
	t.Helper()
	ctx := context.Background()
	ch, err := clickhouse.Open(ctx, clickhouse.Config{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ch.Close() })
	if _, err := clickhouse.Migrate(ctx, ch, nil); err != nil {
		t.Fatal(err)
	}
	return ch
}
