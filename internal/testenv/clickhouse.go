package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
)

// ClickHouseDSN returns a native-protocol DSN of a database created for this
// test alone on the server of DROPSTREAM_TEST_CLICKHOUSE_DSN. The database is
// named t_<16 hex digits> and dropped when the test ends (t.Cleanup). Without
// the variable the test is skipped, or fails when Required; an unreachable
// server fails the test.
func ClickHouseDSN(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvClickHouseDSN)
	if base == "" {
		missing(t, EnvClickHouseDSN+" is not set")
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("testenv: %s: %v", EnvClickHouseDSN, err)
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("testenv: random database name: %v", err)
	}
	name := "t_" + hex.EncodeToString(b[:])

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := chExec(ctx, base, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := chExec(ctx, base, "DROP DATABASE IF EXISTS "+name); err != nil {
			t.Errorf("testenv: %v", err)
		}
	})
	u.Path = "/" + name
	return u.String()
}

// chExec runs one statement on the server of dsn over a connection of its own.
func chExec(ctx context.Context, dsn, query string) error {
	opts, err := ch.ParseDSN(dsn)
	if err != nil {
		return fmt.Errorf("parse %s: %w", EnvClickHouseDSN, err)
	}
	if opts.Protocol != ch.Native {
		return fmt.Errorf("%s must use the native protocol (clickhouse://), got %s", EnvClickHouseDSN, opts.Protocol)
	}
	conn, err := ch.Open(opts)
	if err != nil {
		return fmt.Errorf("open clickhouse: %w", err)
	}
	defer conn.Close()
	if err := conn.Exec(ctx, query); err != nil {
		return fmt.Errorf("clickhouse %q: %w", query, err)
	}
	return nil
}
