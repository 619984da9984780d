package stream

import (
	"cmp"
	"time"

	"github.com/redis/go-redis/v9"
)

// readClient returns the client a runner's blocking reads go through: a
// client of its own on the same server (or cluster) as rdb, with one
// connection per partition the runner reads, and a function that closes
// it.
//
// A blocking XREADGROUP holds its connection for up to Block. A process
// runs every partition of every stage at once (24 stages of 8 partitions
// is 192 blocked reads), so on the shared client the reads would take
// every pooled connection and the handlers, publishers and acks of every
// stage would queue behind them until a read returns: stages then crawl
// at a batch per Block. On their own clients the reads never starve the
// shared pool, whatever its size.
//
// A Sentinel failover client is a *redis.Client whose dialer asks the
// Sentinels for the primary: the copy keeps that dialer, so its reads
// follow a failover as the shared client's commands do. A client of
// another kind (a ring) is used as it is.
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

// maxRawBlock is the longest BLOCK of a read whose reply is read raw or
// in a pipeline: those read under the client's ReadTimeout (3s by
// default), which go-redis extends only for its typed blocking commands.
const maxRawBlock = 2 * time.Second

// rawReadFits reports whether a read blocking for block may go raw or in
// a pipeline: block is at most maxRawBlock and leaves a second of the
// client's read deadline for the reply.
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
