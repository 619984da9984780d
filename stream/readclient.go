package stream

import (
	"cmp"
	"time"

	"github.com/redis/go-redis/v9"
)

// readClient returns the client a runner's blocking reads go through, and
// its closer: a copy of rdb with a connection per partition, so blocked
// reads never take the shared pool's connections. A Sentinel client's copy
// keeps its dialer, so reads follow a failover; other kinds are used as is.
func readClient(rdb redis.UniversalClient, partitions int) (redis.UniversalClient, func()) {
	n := partitions + 1 // one spare for a read that outlives its timeout
	switch c := rdb.(type) {
	case *redis.Client:
		opt := *c.Options()
		opt.PoolSize, opt.MaxIdleConns, opt.MinIdleConns, opt.MaxActiveConns = n, n, 0, 0
		rc := redis.NewClient(&opt)
		return rc, func() { _ = rc.Close() }
	case *redis.ClusterClient:
		opt := *c.Options()
		opt.PoolSize, opt.MaxIdleConns, opt.MinIdleConns, opt.MaxActiveConns = n, n, 0, 0
		rc := redis.NewClusterClient(&opt)
		return rc, func() { _ = rc.Close() }
	}
	return rdb, func() {}
}

// maxRawBlock is the longest BLOCK of a raw or pipelined read: those read
// under the client's ReadTimeout, which go-redis extends only for its
// typed blocking commands.
const maxRawBlock = 2 * time.Second

// rawReadFits reports whether a read blocking for block may go raw: at
// most maxRawBlock, leaving a second of the read deadline for the reply.
func rawReadFits(c redis.UniversalClient, block time.Duration) bool {
	if block > maxRawBlock {
		return false
	}
	var timeout time.Duration
	switch c := c.(type) {
	case *redis.Client:
		timeout = c.Options().ReadTimeout
	case *redis.ClusterClient:
		timeout = c.Options().ReadTimeout
	}
	// go-redis: 0 is its 3s default (assumed for other kinds of client),
	// negative values no deadline.
	return timeout < 0 || block+time.Second <= cmp.Or(timeout, 3*time.Second)
}
