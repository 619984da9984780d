package testenv

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// EnvRedisCluster is the comma-separated list of the nodes ("host:port,...")
// of a running Redis Cluster shared by the tests, in the form stream.Dial
// takes for DROPSTREAM_REDIS_URL. scripts/testenv.sh starts one of 3 masters.
const EnvRedisCluster = "DROPSTREAM_TEST_REDIS_CLUSTER"

// ClusterSlots is the number of hash slots of Redis Cluster.
const ClusterSlots = 16384

// RedisClusterURL returns the node list ("127.0.0.1:p1,127.0.0.1:p2,...") of
// a Redis Cluster for the test, to pass to stream.Dial.
//
// With DROPSTREAM_TEST_REDIS_CLUSTER set, it is that shared cluster. A
// cluster has a single database, so tests sharing it must isolate
// themselves by key names (random flow names, as the stream conformance
// suite does) and never flush it; a test that needs fixed key names or a
// clean cluster uses StartRedisCluster. Without the variable it starts a
// private cluster for the test (StartRedisCluster with defaults). If
// redis-server is not installed the test is skipped, or fails when Required.
func RedisClusterURL(t testing.TB) string {
	t.Helper()
	if nodes := os.Getenv(EnvRedisCluster); nodes != "" {
		return nodes
	}
	return StartRedisCluster(t, RedisClusterConfig{}).URL()
}

// RedisClusterConfig configures a private Redis Cluster started by
// StartRedisCluster. The zero value is valid: 3 masters, no replicas, no
// persistence.
type RedisClusterConfig struct {
	// Masters is the number of master nodes; each serves an equal range of
	// the 16384 slots. Default 3.
	Masters int
	// AppendOnly turns on the append-only file of every node, so a killed
	// node comes back with its data (RedisConfig.AppendOnly).
	AppendOnly bool
	// AppendFsync is the AOF fsync policy (RedisConfig.AppendFsync).
	// Default "everysec".
	AppendFsync string
	// NodeTimeout is cluster-node-timeout: how long a node may be
	// unreachable before the others flag it failing. Default 2s.
	NodeTimeout time.Duration
	// StartTimeout bounds the start of each node and, separately, the wait
	// for the cluster to agree on its slots. Default 15s.
	StartTimeout time.Duration
	// Binary is the redis-server executable (RedisConfig.Binary).
	Binary string
}

// Validate reports whether the configuration is usable.
func (c RedisClusterConfig) Validate() error {
	if c.Masters < 0 || c.Masters > 16 {
		return fmt.Errorf("testenv: RedisClusterConfig.Masters %d out of range 0..16", c.Masters)
	}
	if c.NodeTimeout < 0 {
		return fmt.Errorf("testenv: RedisClusterConfig.NodeTimeout %v is negative", c.NodeTimeout)
	}
	return RedisConfig{AppendFsync: c.AppendFsync, StartTimeout: c.StartTimeout}.Validate()
}

// WithDefaults returns c with zero fields set to their defaults.
func (c RedisClusterConfig) WithDefaults() RedisClusterConfig {
	c.Masters = cmp.Or(c.Masters, 3)
	c.NodeTimeout = cmp.Or(c.NodeTimeout, 2*time.Second)
	c.StartTimeout = cmp.Or(c.StartTimeout, 15*time.Second)
	return c
}

// RedisCluster is a Redis Cluster of master nodes owned by one test, each a
// RedisServer that can be killed and restarted on its own. Node i serves
// the i-th equal range of slots. Nodes run with
// cluster-require-full-coverage no, so while a master is down the slots of
// the others stay available, as in a production cluster without replicas
// configured that way.
type RedisCluster struct {
	cfg   RedisClusterConfig
	nodes []*RedisServer
}

// StartRedisCluster starts cfg.Masters redis-server nodes in cluster mode,
// assigns each a range of slots, joins them (CLUSTER MEET) and waits until
// every node reports cluster_state:ok with all slots assigned. The nodes are
// stopped when the test ends. A missing binary skips the test, or fails it
// when Required; any other failure fails it.
func StartRedisCluster(t testing.TB, cfg RedisClusterConfig) *RedisCluster {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg = cfg.WithDefaults()
	c := &RedisCluster{cfg: cfg}
	for range cfg.Masters {
		c.nodes = append(c.nodes, c.startNode(t))
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.StartTimeout)
	defer cancel()
	if err := c.create(ctx); err != nil {
		t.Fatalf("testenv: create redis cluster: %v", err)
	}
	c.WaitHealthy(t)
	return c
}

// startNode starts one node on a free port with a free cluster bus port
// (cluster-port: the default, port+10000, may be above 65535).
func (c *RedisCluster) startNode(t testing.TB) *RedisServer {
	t.Helper()
	rcfg := RedisConfig{AppendOnly: c.cfg.AppendOnly, AppendFsync: c.cfg.AppendFsync,
		StartTimeout: c.cfg.StartTimeout, Binary: c.cfg.Binary}.withDefaults()
	bin, err := exec.LookPath(rcfg.Binary)
	if err != nil {
		missing(t, fmt.Sprintf("redis-server not available (%v)", err))
	}
	s := &RedisServer{cfg: rcfg, bin: bin, dir: t.TempDir()}
	t.Cleanup(s.Stop)
	for attempt := 1; ; attempt++ {
		s.port = FreePort(t)
		bus := FreePort(t)
		s.cfg.ExtraArgs = []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.FormatInt(c.cfg.NodeTimeout.Milliseconds(), 10),
			"--cluster-port", strconv.Itoa(bus),
			"--cluster-require-full-coverage", "no",
		}
		err = s.start()
		if err == nil {
			return s
		}
		if attempt == 3 || !strings.Contains(err.Error(), "already in use") {
			t.Fatalf("testenv: start redis cluster node: %v", err)
		}
	}
}

// busPort returns the cluster bus port a node was started with.
func busPort(s *RedisServer) string {
	for i, a := range s.cfg.ExtraArgs {
		if a == "--cluster-port" && i+1 < len(s.cfg.ExtraArgs) {
			return s.cfg.ExtraArgs[i+1]
		}
	}
	return ""
}

// create assigns the slot ranges and config epochs, then introduces every
// node to the first one.
func (c *RedisCluster) create(ctx context.Context) error {
	for i, n := range c.nodes {
		lo, hi := c.SlotRange(i)
		err := withNode(n.Addr(), func(rdb *redis.Client) error {
			if err := rdb.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
				return fmt.Errorf("node %d: CLUSTER ADDSLOTSRANGE %d %d: %w", i, lo, hi, err)
			}
			if err := rdb.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
				return fmt.Errorf("node %d: CLUSTER SET-CONFIG-EPOCH: %w", i, err)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return withNode(c.nodes[0].Addr(), func(rdb *redis.Client) error {
		for i, n := range c.nodes[1:] {
			if err := rdb.Do(ctx, "CLUSTER", "MEET", "127.0.0.1", n.port, busPort(n)).Err(); err != nil {
				return fmt.Errorf("node 0: CLUSTER MEET node %d: %w", i+1, err)
			}
		}
		return nil
	})
}

func withNode(addr string, fn func(*redis.Client) error) error {
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	return fn(rdb)
}

// URL returns the node list "127.0.0.1:p1,127.0.0.1:p2,..." that stream.Dial
// takes for Redis Cluster.
func (c *RedisCluster) URL() string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.Addr()
	}
	return strings.Join(addrs, ",")
}

// Node returns node i (0 ≤ i < Masters), to kill or restart it.
func (c *RedisCluster) Node(i int) *RedisServer { return c.nodes[i] }

// Len returns the number of nodes.
func (c *RedisCluster) Len() int { return len(c.nodes) }

// SlotRange returns the first and last slot served by node i.
func (c *RedisCluster) SlotRange(i int) (lo, hi int) {
	n := len(c.nodes)
	return i * ClusterSlots / n, (i+1)*ClusterSlots/n - 1
}

// NodeOfSlot returns the index of the node serving slot.
func (c *RedisCluster) NodeOfSlot(slot int) int {
	for i := range c.nodes {
		if _, hi := c.SlotRange(i); slot <= hi {
			return i
		}
	}
	return len(c.nodes) - 1
}

// NodeOfKey returns the index of the node serving key (the slot of its hash
// tag, see KeySlot).
func (c *RedisCluster) NodeOfKey(key string) int { return c.NodeOfSlot(KeySlot(key)) }

// WaitHealthy waits until every node answers and reports cluster_state:ok
// with all 16384 slots served and every node known and not failing, for
// instance after a node was restarted. It fails the test after
// StartTimeout.
func (c *RedisCluster) WaitHealthy(t testing.TB) {
	t.Helper()
	var why string
	WaitFor(t, c.cfg.StartTimeout, func() bool {
		why = c.health()
		return why == ""
	}, "redis cluster %s healthy (last: %s)", c.URL(), &lazyString{&why})
}

// lazyString prints the string it points to when formatted.
type lazyString struct{ s *string }

func (l *lazyString) String() string { return *l.s }

// health returns "" when the cluster is healthy, or else why not.
func (c *RedisCluster) health() string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for i, n := range c.nodes {
		err := withNode(n.Addr(), func(rdb *redis.Client) error {
			info, err := rdb.ClusterInfo(ctx).Result()
			if err != nil {
				return err
			}
			for _, want := range []string{"cluster_state:ok", "cluster_slots_ok:16384",
				"cluster_known_nodes:" + strconv.Itoa(len(c.nodes))} {
				if !strings.Contains(info, want+"\r\n") {
					return errors.New("CLUSTER INFO lacks " + want)
				}
			}
			nodes, err := rdb.ClusterNodes(ctx).Result()
			if err != nil {
				return err
			}
			for line := range strings.SplitSeq(strings.TrimSpace(nodes), "\n") {
				if f := strings.Fields(line); len(f) > 2 && strings.Contains(f[2], "fail") {
					return fmt.Errorf("sees node %s as %s", f[1], f[2])
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Sprintf("node %d (%s): %v", i, n.Addr(), err)
		}
	}
	return ""
}

// KeySlot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of
// the key, or of its hash tag (the part between the first "{" and the next
// "}" when not empty), modulo 16384.
func KeySlot(key string) int {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			key = key[s+1 : s+1+e]
		}
	}
	return int(crc16(key) % ClusterSlots)
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), the checksum
// Redis Cluster hashes keys with.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
