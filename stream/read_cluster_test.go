package stream

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/testenv"
)

// TestRead_rawOnClusterFollowsASlotMove reads a partition of a private
// Redis Cluster, moves the partition's slot (stream and group) to another
// master, and reads on: no message is lost, and reads go back to the raw
// path on the new owner (only the raw decoder sets st.entries).
func TestRead_rawOnClusterFollowsASlotMove(t *testing.T) {
	ctx := t.Context()
	rdb := testenv.Dial(t, testenv.StartRedisCluster(t, testenv.RedisClusterConfig{}).URL())
	cc := rdb.(*redis.ClusterClient)
	topic := NewTopic("move", "events", 1)
	r, err := NewRunner(rdb, Stage{Name: "move", Topic: topic, Handler: func(context.Context, *Message) error { return nil }}, Telemetry{})
	if err != nil {
		t.Fatal(err)
	}
	if err := EnsureGroups(ctx, rdb, topic, "move"); err != nil {
		t.Fatal(err)
	}
	reads, closeReads := readClient(rdb, 1)
	t.Cleanup(closeReads)
	r.reads = reads
	st := &partitionState{p: 0, stream: topic.Stream(0)}
	pub := NewPublisher(rdb, Telemetry{})
	published, read := 0, 0
	// readRaw publishes and reads until a read decodes its reply raw.
	readRaw := func(typ string) {
		t.Helper()
		testenv.WaitFor(t, 30*time.Second, func() bool {
			if err := pub.Publish(ctx, topic, NewMessage("k", typ, []byte("x"))); err != nil {
				t.Fatal(err)
			}
			published++
			st.entries = entryReuse{}
			msgs, err := r.read(ctx, st, 10*time.Millisecond)
			if err != nil {
				t.Logf("read: %v", err)
			}
			read += len(msgs)
			return len(msgs) > 0 && st.entries.typ == typ
		}, "no raw read of %s", typ)
	}
	readRaw("before")

	src, err := cc.MasterForKey(ctx, st.stream)
	if err != nil {
		t.Fatal(err)
	}
	var dst *redis.Client
	var masters []*redis.Client
	var mu sync.Mutex // ForEachMaster calls its function concurrently
	if err := cc.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		masters = append(masters, c)
		if dst == nil && c.Options().Addr != src.Options().Addr {
			dst = c
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	moveSlot(t, testenv.KeySlot(st.stream), src, dst, masters)

	readRaw("after")
	for read < published {
		msgs, err := r.read(ctx, st, 10*time.Millisecond)
		if err != nil || len(msgs) == 0 {
			t.Fatalf("read %d of %d messages published (last read: %v)", read, published, err)
		}
		read += len(msgs)
	}
	if n, err := dst.XLen(ctx, st.stream).Result(); err != nil || n != int64(published) {
		t.Errorf("new owner holds %d entries (%v), want %d", n, err, published)
	}
}

// moveSlot migrates slot, with its keys, from src to dst, and tells every
// master.
func moveSlot(t *testing.T, slot int, src, dst *redis.Client, masters []*redis.Client) {
	t.Helper()
	ctx := t.Context()
	id := func(c *redis.Client) string {
		s, err := c.ClusterMyID(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	srcID, dstID := id(src), id(dst)
	host, port, _ := net.SplitHostPort(dst.Options().Addr)
	must := func(c *redis.Client, args ...any) {
		if err := c.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	must(dst, "cluster", "setslot", slot, "importing", srcID)
	must(src, "cluster", "setslot", slot, "migrating", dstID)
	keys, err := src.ClusterGetKeysInSlot(ctx, slot, 1000).Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("keys in slot %d: %v, %v", slot, keys, err)
	}
	args := []any{"migrate", host, port, "", 0, 5000, "keys"}
	for _, k := range keys {
		args = append(args, k)
	}
	must(src, args...)
	for _, c := range append([]*redis.Client{dst, src}, masters...) {
		must(c, "cluster", "setslot", slot, "node", dstID)
	}
}
