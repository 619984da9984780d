package notifier

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// waitTimeout bounds every wait of the tests.
const waitTimeout = 20 * time.Second

// backend is a Redis the tests run against; client returns a client on an
// empty database of the test's own.
type backend struct {
	name   string
	client func(t *testing.T) redis.UniversalClient
}

func backends() []backend {
	return []backend{
		{"miniredis", func(t *testing.T) redis.UniversalClient {
			return dial(t, "redis://"+miniredis.RunT(t).Addr())
		}},
		{"redis-server", func(t *testing.T) redis.UniversalClient {
			return dial(t, testenv.RedisURL(t))
		}},
	}
}

// mini returns a client of a fresh miniredis, for pure logic.
func mini(t *testing.T) redis.UniversalClient {
	t.Helper()
	return dial(t, "redis://"+miniredis.RunT(t).Addr())
}

func dial(t testing.TB, url string) redis.UniversalClient {
	t.Helper()
	rdb, err := stream.Dial(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// quiet discards the logs of code under test.
var quiet = slog.New(slog.DiscardHandler)
