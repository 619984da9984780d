package stream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Dial connects to Redis: a redis:// or rediss:// URL for one server, a
// redis-sentinel:// URL for a primary behind Sentinels (ParseSentinelURL), or
// host:port,... for Redis Cluster. The pool fits a blocking reader per
// partition and stage.
func Dial(ctx context.Context, url string) (redis.UniversalClient, error) {
	var rdb redis.UniversalClient
	switch {
	case strings.HasPrefix(url, SentinelScheme+"://"):
		opt, err := ParseSentinelURL(url)
		if err != nil {
			return nil, err
		}
		opt.PoolSize = max(opt.PoolSize, 64)
		rdb = redis.NewFailoverClient(opt)
	case strings.Contains(url, "://"):
		opt, err := redis.ParseURL(url)
		if err != nil {
			return nil, fmt.Errorf("redis url: %w", err)
		}
		opt.PoolSize = max(opt.PoolSize, 64)
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

// redactURL returns u without its password and query (where a Sentinel's
// password may be).
func redactURL(u string) string {
	if q := strings.IndexByte(u, '?'); q >= 0 {
		u = u[:q]
	}
	at := strings.LastIndexByte(u, '@')
	scheme := strings.Index(u, "://")
	if at < 0 || scheme < 0 || at < scheme {
		return u
	}
	return u[:scheme+3] + "***" + u[at:]
}

// Embedded is an in-process Redis (miniredis) for the embedded mode: one
// process, no persistence, every stream feature the runtime uses.
type Embedded struct {
	srv      *miniredis.Miniredis
	password string
	stop     chan struct{}
	done     chan struct{}
}

// Aging. TTLs count down in steps at least expiryTick apart. A step walks
// every key under the server's lock, so the next waits agingShare times as
// long as it took, at most maxAgingWait, well within a lease's renewal.
const (
	expiryTick   = 50 * time.Millisecond
	agingShare   = 50
	maxAgingWait = 2 * time.Second
)

// agingWait is the wait before the next step of aging after one that took
// took.
func agingWait(took time.Duration) time.Duration {
	return min(maxAgingWait, max(expiryTick, agingShare*took))
}

// StartEmbedded starts an in-process Redis on a free loopback port, its keys
// expiring on the wall clock (miniredis alone never ages them), behind a
// random 128-bit password new at each start ([Embedded.URL] carries it).
func StartEmbedded() (*Embedded, error) {
	var pw [16]byte
	if _, err := rand.Read(pw[:]); err != nil {
		return nil, fmt.Errorf("start embedded redis: password: %w", err)
	}
	srv := miniredis.NewMiniRedis()
	password := hex.EncodeToString(pw[:])
	srv.RequireAuth(password)
	if err := srv.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("start embedded redis: %w", err)
	}
	e := &Embedded{srv: srv, password: password, stop: make(chan struct{}), done: make(chan struct{})}
	go e.age()
	return e, nil
}

// age moves the server's clock with the wall clock until Close, one step
// every agingWait.
func (e *Embedded) age() {
	defer close(e.done)
	last := time.Now()
	wait := expiryTick
	for {
		t := time.NewTimer(wait)
		select {
		case <-e.stop:
			t.Stop()
			return
		case <-t.C:
			// The step is timed from its own start, not from the timer's
			// firing: on a busy machine the goroutine runs late, and that
			// delay, multiplied, would freeze the clock for seconds.
			now := time.Now()
			e.srv.FastForward(now.Sub(last))
			last = now
			wait = agingWait(time.Since(now))
		}
	}
}

// URL returns the redis:// URL of the embedded server, its password
// included: give it to the clients, never to a log.
func (e *Embedded) URL() string { return "redis://:" + e.password + "@" + e.srv.Addr() + "/0" }

// Addr returns the embedded server's host:port, without the password.
func (e *Embedded) Addr() string { return e.srv.Addr() }

// Close stops the embedded server; its data is gone.
func (e *Embedded) Close() {
	close(e.stop)
	<-e.done
	e.srv.Close()
}

func randomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
