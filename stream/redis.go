package stream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Dial connects to Redis. url is a redis:// or rediss:// URL for one server,
// or a comma-separated list of host:port for Redis Cluster. The pool is sized
// for one blocking reader per partition and stage.
func Dial(ctx context.Context, url string) (redis.UniversalClient, error) {
	var rdb redis.UniversalClient
	switch {
	case strings.Contains(url, "://"):
		opt, err := redis.ParseURL(url)
		if err != nil {
			return nil, fmt.Errorf("redis url: %w", err)
		}
		if opt.PoolSize < 64 {
			opt.PoolSize = 64
		}
		rdb = redis.NewClient(opt)
	case url != "":
		addrs := strings.Split(url, ",")
		for i := range addrs {
			addrs[i] = strings.TrimSpace(addrs[i])
		}
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, PoolSize: 64})
	default:
		return nil, fmt.Errorf("redis url is empty")
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("redis ping %s: %w", redactURL(url), err)
	}
	return rdb, nil
}

func redactURL(u string) string {
	at := strings.LastIndexByte(u, '@')
	scheme := strings.Index(u, "://")
	if at < 0 || scheme < 0 || at < scheme {
		return u
	}
	return u[:scheme+3] + "***" + u[at:]
}

// Embedded is an in-process Redis (miniredis) for the embedded mode: no
// persistence, one process, every stream feature the runtime uses.
type Embedded struct {
	srv *miniredis.Miniredis
}

// StartEmbedded starts an in-process Redis on a free loopback port.
func StartEmbedded() (*Embedded, error) {
	srv := miniredis.NewMiniRedis()
	if err := srv.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("start embedded redis: %w", err)
	}
	return &Embedded{srv: srv}, nil
}

// URL returns the redis:// URL of the embedded server.
func (e *Embedded) URL() string { return "redis://" + e.srv.Addr() + "/0" }

// Close stops the embedded server; its data is gone.
func (e *Embedded) Close() { e.srv.Close() }

func randomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
