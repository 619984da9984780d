package testenv

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func clusterClient(t *testing.T, nodes string) *redis.ClusterClient {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(nodes, ","), MaxRedirects: 8})
	t.Cleanup(func() { c.Close() })
	return c
}

func TestKeySlot_matchesRedis(t *testing.T) {
	c := clusterClient(t, RedisClusterURL(t))
	ctx := t.Context()
	keys := []string{"", "a", "foo", "ds:{avail.0}:raw", "ds:{avail.7}:transitions", "{}x", "x{}{y}", "{a}{b}", "123456789"}
	for i := range 50 {
		keys = append(keys, fmt.Sprintf("key:%d", i))
	}
	for _, k := range keys {
		want, err := c.ClusterKeySlot(ctx, k).Result()
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT %q: %v", k, err)
		}
		if got := KeySlot(k); int64(got) != want {
			t.Errorf("KeySlot(%q) = %d, Redis says %d", k, got, want)
		}
	}
}

func TestRedisCluster_killedMasterStallsOnlyItsSlots(t *testing.T) {
	cl := StartRedisCluster(t, RedisClusterConfig{AppendOnly: true, AppendFsync: "always", NodeTimeout: time.Second})
	c := clusterClient(t, cl.URL())
	ctx := t.Context()
	// One key per node, found by slot.
	keyOf := map[int]string{}
	for i := 0; len(keyOf) < cl.Len(); i++ {
		k := fmt.Sprintf("k%d", i)
		if _, ok := keyOf[cl.NodeOfKey(k)]; !ok {
			keyOf[cl.NodeOfKey(k)] = k
		}
	}
	for node, k := range keyOf {
		if err := c.Set(ctx, k, node, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
		direct := redis.NewClient(&redis.Options{Addr: cl.Node(node).Addr()})
		got, err := direct.Get(ctx, k).Int()
		direct.Close()
		if err != nil || got != node {
			t.Fatalf("key %s on node %d directly: %d, %v", k, node, got, err)
		}
	}

	cl.Node(1).Kill()
	for node, k := range keyOf {
		err := c.Set(ctx, k, node+10, 0).Err()
		if node == 1 && err == nil {
			t.Errorf("SET %s served by the killed node succeeded", k)
		}
		if node != 1 && err != nil {
			t.Errorf("SET %s on live node %d: %v", k, node, err)
		}
	}

	cl.Node(1).Restart(t)
	WaitFor(t, 10*time.Second, func() bool { return c.Get(ctx, keyOf[1]).Err() == nil }, "killed node serves again")
	for node, k := range keyOf {
		want := node + 10
		if node == 1 {
			want = node // its second SET failed; the first was in the AOF
		}
		if got, err := c.Get(ctx, k).Int(); err != nil || got != want {
			t.Errorf("GET %s after restart = %d, %v; want %d", k, got, err, want)
		}
	}
}

func TestRedisClusterConfig_Validate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     RedisClusterConfig
		wantErr bool
	}{
		{name: "zero value", cfg: RedisClusterConfig{}},
		{name: "aof always", cfg: RedisClusterConfig{AppendOnly: true, AppendFsync: "always"}},
		{name: "too many masters", cfg: RedisClusterConfig{Masters: 17}, wantErr: true},
		{name: "negative node timeout", cfg: RedisClusterConfig{NodeTimeout: -time.Second}, wantErr: true},
		{name: "bad fsync", cfg: RedisClusterConfig{AppendFsync: "sometimes"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.cfg.Validate(); (err != nil) != tt.wantErr {
				t.Fatalf("Validate() = %v, wantErr %v", err, tt.wantErr)
			}
		})
	}
}

// Ensure the private cluster really spreads slots: every node serves the
// keys of its range.
func TestStartRedisCluster_slotRangesCoverAll(t *testing.T) {
	cl := StartRedisCluster(t, RedisClusterConfig{Masters: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := clusterClient(t, cl.URL())
	shards, err := c.ClusterShards(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	covered := 0
	for _, sh := range shards {
		if len(sh.Nodes) != 1 {
			t.Fatalf("shard with %d nodes, want 1 (no replicas)", len(sh.Nodes))
		}
		addr := fmt.Sprintf("%s:%d", sh.Nodes[0].IP, sh.Nodes[0].Port)
		for _, r := range sh.Slots {
			covered += int(r.End - r.Start + 1)
			if i := cl.NodeOfSlot(int(r.Start)); addr != cl.Node(i).Addr() || cl.NodeOfSlot(int(r.End)) != i {
				t.Errorf("slots %d-%d served by %s, want node %d (%s)", r.Start, r.End, addr, i, cl.Node(i).Addr())
			}
		}
	}
	if covered != ClusterSlots {
		t.Errorf("slots covered: %d, want %d", covered, ClusterSlots)
	}
}
