package stream

import (
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestReadClient_failoverClientKeepsItsDialer: a stage on a Sentinel
// failover client reads through a client of its own that dials as the
// failover client does (the primary the Sentinels name), not by address.
func TestReadClient_failoverClientKeepsItsDialer(t *testing.T) {
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}})
	t.Cleanup(func() { _ = rdb.Close() })
	reads, closeReads := readClient(rdb, 4)
	t.Cleanup(closeReads)
	if _, ok := reads.(*redis.Client); !ok || reads == rdb {
		t.Fatalf("reads go through %T (the shared client: %v), want a client of their own", reads, reads == rdb)
	}
	if reads.(*redis.Client).Options().Dialer == nil {
		t.Fatal("reads dial the address, not through the failover client's dialer")
	}
}
