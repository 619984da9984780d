package stream_test

import (
	"context"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/stream/streamtest"
)

// TestConformance_miniredis runs the suite against the embedded mode's Redis.
func TestConformance_miniredis(t *testing.T) {
	streamtest.Run(t, streamtest.Backend{
		Name: "miniredis",
		Client: func(t *testing.T) redis.UniversalClient {
			srv := miniredis.RunT(t)
			rdb, err := stream.Dial(context.Background(), "redis://"+srv.Addr())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = rdb.Close() })
			return rdb
		},
	})
}

// TestConformance_redisServer runs the suite against a real redis-server.
func TestConformance_redisServer(t *testing.T) {
	url := testenv.RedisURL(t)
	streamtest.Run(t, streamtest.Backend{
		Name:     "redis-server",
		Features: streamtest.Features{IdleTimes: true},
		Client:   dialed(url),
	})
}

// TestConformance_redisSentinel runs the suite through a redis-sentinel://
// client (go-redis's failover client) on a primary with a replica and
// three Sentinels of its own.
func TestConformance_redisSentinel(t *testing.T) {
	url := testenv.StartRedisSentinel(t, testenv.RedisSentinelConfig{}).URL()
	streamtest.Run(t, streamtest.Backend{
		Name:     "redis-sentinel",
		Features: streamtest.Features{IdleTimes: true},
		Client:   dialed(url),
	})
}

// dialed returns a backend's client factory: stream.Dial of url, closed
// when the test ends.
func dialed(url string) func(t *testing.T) redis.UniversalClient {
	return func(t *testing.T) redis.UniversalClient {
		rdb, err := stream.Dial(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rdb.Close() })
		return rdb
	}
}
