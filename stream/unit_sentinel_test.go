package stream

import (
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestDirectOptions_failoverClientReadsDirect: a stage on a Sentinel
// failover client reads through the direct path, dialled by the failover
// client's dialer (the primary the Sentinels name), not by its address.
func TestDirectOptions_failoverClientReadsDirect(t *testing.T) {
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}})
	t.Cleanup(func() { _ = rdb.Close() })
	reads, closeReads := readClient(rdb, 4)
	t.Cleanup(closeReads)
	if _, ok := reads.(*redis.Client); !ok || reads == rdb {
		t.Fatalf("reads go through %T (the shared client: %v), want a client of their own", reads, reads == rdb)
	}
	opt := directOptions(reads)
	if opt == nil {
		t.Fatal("no direct reads on a failover client")
	}
	if opt.Dialer == nil {
		t.Fatal("direct reads dial the address, not through the failover client's dialer")
	}
}
