package testenv

import (
	"errors"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/redis/go-redis/v9"
)

func redisClient(t *testing.T, url string) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("parse %q: %v", url, err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	return c
}

func TestStartRedis_killAndRestartKeepsOnlyPersistedData(t *testing.T) {
	tests := []struct {
		name     string
		cfg      RedisConfig
		wantKept bool
	}{
		{name: "aof always", cfg: RedisConfig{AppendOnly: true, AppendFsync: "always"}, wantKept: true},
		// SIGKILL ends the process, not the OS: everysec has already written
		// the acknowledged command to the file, only fsync is pending.
		{name: "aof everysec", cfg: RedisConfig{AppendOnly: true}, wantKept: true},
		{name: "no persistence", cfg: RedisConfig{}, wantKept: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := StartRedis(t, tt.cfg)
			ctx := t.Context()
			c := redisClient(t, srv.URL())
			if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
				t.Fatalf("SET: %v", err)
			}
			addr := srv.Addr()

			srv.Kill()
			if srv.Running() {
				t.Fatal("Running() after Kill")
			}
			srv.Restart(t)
			if srv.Addr() != addr {
				t.Fatalf("Addr() = %s after restart, want %s", srv.Addr(), addr)
			}

			got, err := c.Get(ctx, "k").Result()
			switch {
			case tt.wantKept && err != nil:
				t.Fatalf("GET after restart: %v, want v", err)
			case tt.wantKept && got != "v":
				t.Fatalf("GET after restart = %q, want v", got)
			case !tt.wantKept && !errors.Is(err, redis.Nil):
				t.Fatalf("GET after restart = %q, %v; want redis.Nil", got, err)
			}
		})
	}
}

func TestRedisServer_restartRunningAndStop(t *testing.T) {
	srv := StartRedis(t, RedisConfig{AppendOnly: true, AppendFsync: "always"})
	c := redisClient(t, srv.URL())
	ctx := t.Context()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	srv.Restart(t) // graceful: SIGTERM, then start again
	if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET after graceful restart = %q, %v", got, err)
	}
	srv.Stop()
	srv.Stop() // idempotent
	srv.Kill() // no-op when stopped
	if srv.Running() {
		t.Fatal("Running() after Stop")
	}
	if err := ping(srv.Addr(), time.Second); err == nil {
		t.Fatal("PING succeeded after Stop")
	}
}

func TestRedisURL_givesIsolatedDatabases(t *testing.T) {
	ctx := t.Context()
	a := redisClient(t, RedisURL(t))
	b := redisClient(t, RedisURL(t))
	if err := a.Set(ctx, "shared-name", "a", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if n, err := b.Exists(ctx, "shared-name").Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS in the other database = %d, %v; want 0", n, err)
	}
}

func TestClickHouseDSN_givesFreshDatabaseDroppedAtCleanup(t *testing.T) {
	var db string
	t.Run("use", func(t *testing.T) {
		dsn := ClickHouseDSN(t)
		opts, err := ch.ParseDSN(dsn)
		if err != nil {
			t.Fatalf("parse %q: %v", dsn, err)
		}
		db = opts.Auth.Database
		conn := openCH(t, opts)
		ctx := t.Context()
		if err := conn.Exec(ctx, "CREATE TABLE x (a UInt8) ENGINE = Memory"); err != nil {
			t.Fatalf("create table: %v", err)
		}
		var n uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = currentDatabase()").Scan(&n); err != nil {
			t.Fatalf("count tables: %v", err)
		}
		if n != 1 {
			t.Fatalf("tables in fresh database %s = %d, want 1", db, n)
		}
	})
	if db == "" {
		t.Skip("no ClickHouse database was created")
	}
	opts, err := ch.ParseDSN(ClickHouseDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	conn := openCH(t, opts)
	var n uint64
	if err := conn.QueryRow(t.Context(), "SELECT count() FROM system.databases WHERE name = ?", db).Scan(&n); err != nil {
		t.Fatalf("count databases: %v", err)
	}
	if n != 0 {
		t.Fatalf("database %s still exists after its test ended", db)
	}
}

func openCH(t *testing.T, opts *ch.Options) ch.Conn {
	t.Helper()
	opts.DialTimeout = 5 * time.Second
	conn, err := ch.Open(opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
