// Package clickhousetest gives tests a ClickHouse database of their own
// with dropstream's schema.
package clickhousetest

import (
	"context"
	"testing"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/internal/testenv"
)

// Open returns a client of a database created for this test alone (see
// testenv.ClickHouseDSN) with every migration applied, closed when the
// test ends. Any failure fails the test.
func Open(t testing.TB) *clickhouse.Client {
	t.Helper()
	ctx := context.Background()
	ch, err := clickhouse.Open(ctx, clickhouse.Config{DSN: testenv.ClickHouseDSN(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ch.Close() })
	if _, err := clickhouse.Migrate(ctx, ch, nil); err != nil {
		t.Fatal(err)
	}
	return ch
}
