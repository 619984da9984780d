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

// Read sizing. A read asks for at most BatchSize entries, and at most as
// many as fit in ReadBytes at the mean size of the partition's last
// entries. This bounds a read's memory and keeps a reply within one of
// Redis's ~64 KB writes (BENCHMARKS.md, "Reads sized by bytes").

// firstEntryBytes is the entry size assumed before a partition's first read.
const firstEntryBytes = 256

// readSize is what a partition learned of its entries' size.
type readSize struct {
	entryBytes int // mean reply bytes per entry of the last non-empty read; 0 before it
}

// count is how many entries the next read asks for.
func (s *readSize) count(cfg RunnerConfig) int {
	return max(1, min(cfg.BatchSize, cfg.ReadBytes/cmp.Or(s.entryBytes, firstEntryBytes)))
}

// took records a read of asked entries that returned msgs in size bytes,
// and marks msgs as likely followed by more (Message.MoreWaiting) when the
// read was full.
func (s *readSize) took(size int, msgs []*Message, asked int) {
	if n := len(msgs); n > 0 && size > 0 {
		s.entryBytes = max(1, size/n)
	}
	if len(msgs) < asked {
		return
	}
	for _, m := range msgs {
		m.full = true
	}
}
