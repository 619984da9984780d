package testenv

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Backend is a Redis that a suite of tests runs against. Client returns a
// client on an empty database of the calling test's own, closed when the
// test ends.
type Backend struct {
	Name   string
	Client func(t testing.TB) redis.UniversalClient
}

// Backends returns the two Redis implementations every stream and stage test
// runs against: the embedded miniredis and a real redis-server (RedisURL).
func Backends() []Backend {
	return []Backend{
		{"miniredis", func(t testing.TB) redis.UniversalClient {
			return Dial(t, "redis://"+miniredis.RunT(t).Addr())
		}},
		{"redis-server", func(t testing.TB) redis.UniversalClient {
			return Dial(t, RedisURL(t))
		}},
	}
}

// WithCluster returns Backends plus a private 3-master Redis Cluster
// (StartRedisCluster), for tests that prove a script's keys share a slot.
// A cluster takes seconds to start, so only a few tests should use it.
func WithCluster() []Backend {
	return append(Backends(), Backend{"redis-cluster", func(t testing.TB) redis.UniversalClient {
		return Dial(t, StartRedisCluster(t, RedisClusterConfig{}).URL())
	}})
}

// PrivateBackends is Backends with a redis-server of the test's own
// (StartRedis) instead of a database on the shared one, for tests that
// change what a whole server holds, such as SCRIPT FLUSH.
func PrivateBackends() []Backend {
	return []Backend{
		Backends()[0],
		{"redis-server", func(t testing.TB) redis.UniversalClient {
			return Dial(t, StartRedis(t, RedisConfig{}).URL())
		}},
	}
}

// PrivateWithCluster is PrivateBackends plus the private Redis Cluster of
// WithCluster.
func PrivateWithCluster() []Backend {
	all := WithCluster()
	return append(PrivateBackends(), all[len(all)-1])
}

// Dial connects to url the way stream.Dial does — a redis:// URL for one
// server, or a comma-separated host:port list for Redis Cluster — pings it,
// and closes the client when the test ends. It fails the test on error.
func Dial(t testing.TB, url string) redis.UniversalClient {
	t.Helper()
	var rdb redis.UniversalClient
	if strings.Contains(url, "://") {
		opt, err := redis.ParseURL(url)
		if err != nil {
			t.Fatalf("testenv: redis url %q: %v", url, err)
		}
		opt.PoolSize = max(opt.PoolSize, 64)
		rdb = redis.NewClient(opt)
	} else {
		addrs := strings.Split(url, ",")
		for i := range addrs {
			addrs[i] = strings.TrimSpace(addrs[i])
		}
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, PoolSize: 64})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		t.Fatalf("testenv: redis ping %s: %v", url, err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}
