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
	ctx := context.Background()
	ch, err := clickhouse.Open(ctx, clickhouse.Config{DSN: ClickHouseDSN(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ch.Close() })
	if _, err := clickhouse.Migrate(ctx, ch, nil); err != nil {
		t.Fatal(err)
	}
	return ch
}
