package testenv

import (
	"context"
	"net/url"
	"testing"
	"time"

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

// DialClickHouse returns a client of the database of dsn, reached through
// the proxy at via when via is not empty, with a one-second dial timeout
// and no migration, closed when the test ends.
func DialClickHouse(t testing.TB, dsn, via string) *clickhouse.Client {
	t.Helper()
	if via != "" {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatalf("dsn: %v", err)
		}
		u.Host = via
		dsn = u.String()
	}
	c, err := clickhouse.Open(t.Context(), clickhouse.Config{DSN: dsn, DialTimeout: time.Second})
	if err != nil {
		t.Fatalf("clickhouse Open: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}
