package testenv

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// EnvRedisSentinel is the path of the redis-sentinel binary (Debian's
// redis-sentinel package) used by StartRedisSentinel.
const EnvRedisSentinel = "DROPSTREAM_TEST_REDIS_SENTINEL"

// RedisSentinelConfig configures a private primary, its replicas and three
// Sentinels started by StartRedisSentinel. The zero value is valid: one
// replica, no persistence, a primary deemed down after 1s.
type RedisSentinelConfig struct {
	// Master is the name the Sentinels monitor the primary by. Default
	// "dropstream".
	Master string
	// Replicas is the number of replicas of the primary. Default 1.
	Replicas int
	// DownAfter is the Sentinels' down-after-milliseconds: how long the
	// primary may not answer before a Sentinel deems it down. Default 1s.
	DownAfter time.Duration
	// FailoverTimeout is the Sentinels' failover-timeout. Default 3s.
	FailoverTimeout time.Duration
	// AppendOnly and AppendFsync set the persistence of every data node
	// (RedisConfig).
	AppendOnly  bool
	AppendFsync string
	// StartTimeout bounds the start of each process and, separately, the
	// waits for the set to be healthy. Default 20s.
	StartTimeout time.Duration
	// Binary is the redis-server executable (RedisConfig.Binary).
	Binary string
	// SentinelBinary is the redis-sentinel executable. Default:
	// $DROPSTREAM_TEST_REDIS_SENTINEL, else "redis-sentinel" in PATH.
	SentinelBinary string
}

// sentinels is the number of Sentinels of a set: a quorum of 2 survives
// the loss of one.
const sentinels = 3

// Validate reports whether the configuration is usable.
func (c RedisSentinelConfig) Validate() error {
	if c.Replicas < 0 || c.Replicas > 4 {
		return fmt.Errorf("testenv: RedisSentinelConfig.Replicas %d out of range 0..4", c.Replicas)
	}
	if c.DownAfter < 0 || c.FailoverTimeout < 0 {
		return fmt.Errorf("testenv: RedisSentinelConfig: negative down-after %v or failover timeout %v", c.DownAfter, c.FailoverTimeout)
	}
	if strings.ContainsAny(c.Master, " \t\r\n/") {
		return fmt.Errorf("testenv: RedisSentinelConfig.Master %q: no spaces or slashes", c.Master)
	}
	return RedisConfig{AppendFsync: c.AppendFsync, StartTimeout: c.StartTimeout}.Validate()
}

// WithDefaults returns c with zero fields set to their defaults.
func (c RedisSentinelConfig) WithDefaults() RedisSentinelConfig {
	c.Master = cmp.Or(c.Master, "dropstream")
	c.Replicas = cmp.Or(c.Replicas, 1)
	c.DownAfter = cmp.Or(c.DownAfter, time.Second)
	c.FailoverTimeout = cmp.Or(c.FailoverTimeout, 3*time.Second)
	c.StartTimeout = cmp.Or(c.StartTimeout, 20*time.Second)
	if c.SentinelBinary == "" {
		c.SentinelBinary = os.Getenv(EnvRedisSentinel)
	}
	c.SentinelBinary = cmp.Or(c.SentinelBinary, "redis-sentinel")
	return c
}

// RedisSentinel is a primary, its replicas and three Sentinels monitoring
// it, owned by one test: each a RedisServer that can be killed and
// restarted on its own. Node 0 starts as the primary; after a failover
// the Sentinels name another (Primary).
type RedisSentinel struct {
	cfg       RedisSentinelConfig
	nodes     []*RedisServer
	sentinels []*RedisServer
}

// StartRedisSentinel starts the primary, its replicas (replicaof the
// primary, diskless sync without delay) and three Sentinels (quorum 2),
// and waits until the replicas are in sync and every Sentinel knows the
// replicas and the other Sentinels, so a failover can start. Everything
// is stopped when the test ends. A missing binary skips the test, or
// fails it when Required; any other failure fails it.
func StartRedisSentinel(t testing.TB, cfg RedisSentinelConfig) *RedisSentinel {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg = cfg.WithDefaults()
	sbin, err := exec.LookPath(cfg.SentinelBinary)
	if err != nil {
		missing(t, fmt.Sprintf("redis-sentinel not available (%v)", err))
	}
	s := &RedisSentinel{cfg: cfg}
	sync := []string{"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"}
	rcfg := RedisConfig{AppendOnly: cfg.AppendOnly, AppendFsync: cfg.AppendFsync, StartTimeout: cfg.StartTimeout,
		Binary: cfg.Binary, ExtraArgs: sync}
	primary := StartRedis(t, rcfg)
	s.nodes = append(s.nodes, primary)
	rcfg.ExtraArgs = append(sync, "--replicaof", "127.0.0.1", strconv.Itoa(primary.port))
	for range cfg.Replicas {
		s.nodes = append(s.nodes, StartRedis(t, rcfg))
	}
	s.WaitReplicated(t)
	for range sentinels {
		s.sentinels = append(s.sentinels, s.startSentinel(t, sbin))
	}
	s.WaitHealthy(t)
	return s
}

// startSentinel starts one Sentinel on a free port, with its own config
// file (which it rewrites) monitoring node 0.
func (s *RedisSentinel) startSentinel(t testing.TB, bin string) *RedisServer {
	t.Helper()
	m := s.cfg.Master
	srv := &RedisServer{cfg: RedisConfig{StartTimeout: s.cfg.StartTimeout}, bin: bin, dir: t.TempDir()}
	srv.conf = filepath.Join(srv.dir, "sentinel.conf")
	conf := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 2\n"+
		"sentinel down-after-milliseconds %s %d\n"+
		"sentinel failover-timeout %s %d\n"+
		"sentinel parallel-syncs %s 1\n",
		m, s.nodes[0].port, m, s.cfg.DownAfter.Milliseconds(), m, s.cfg.FailoverTimeout.Milliseconds(), m)
	if err := os.WriteFile(srv.conf, []byte(conf), 0o644); err != nil {
		t.Fatalf("testenv: sentinel config: %v", err)
	}
	t.Cleanup(srv.Stop)
	for attempt := 1; ; attempt++ {
		srv.port = FreePort(t)
		err := srv.start()
		if err == nil {
			return srv
		}
		if attempt == 3 || !strings.Contains(err.Error(), "already in use") {
			t.Fatalf("testenv: start redis-sentinel: %v", err)
		}
	}
}

// URL returns "redis-sentinel://127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3/master",
// the form stream.Dial takes for a primary behind Sentinels.
func (s *RedisSentinel) URL() string {
	return "redis-sentinel://" + strings.Join(s.Sentinels(), ",") + "/" + s.cfg.Master
}

// Sentinels returns the Sentinels' "127.0.0.1:port" addresses.
func (s *RedisSentinel) Sentinels() []string {
	addrs := make([]string, len(s.sentinels))
	for i, n := range s.sentinels {
		addrs[i] = n.Addr()
	}
	return addrs
}

// Master returns the name the Sentinels monitor the primary by.
func (s *RedisSentinel) Master() string { return s.cfg.Master }

// Node returns data node i (0 started as the primary), to kill or restart
// it.
func (s *RedisSentinel) Node(i int) *RedisServer { return s.nodes[i] }

// Len returns the number of data nodes, the primary included.
func (s *RedisSentinel) Len() int { return len(s.nodes) }

// Primary returns the index of the node every answering Sentinel names as
// the primary, or -1 while they disagree or name no known node.
func (s *RedisSentinel) Primary() int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	named := -1
	for _, sn := range s.sentinels {
		if !sn.Running() {
			continue
		}
		c := redis.NewSentinelClient(&redis.Options{Addr: sn.Addr(), MaxRetries: -1})
		addr, err := c.GetMasterAddrByName(ctx, s.cfg.Master).Result()
		_ = c.Close()
		if err != nil || len(addr) != 2 {
			return -1
		}
		i := s.nodeAt(addr[0] + ":" + addr[1])
		if i < 0 || (named >= 0 && i != named) {
			return -1
		}
		named = i
	}
	return named
}

// nodeAt returns the index of the node at addr, -1 for none.
func (s *RedisSentinel) nodeAt(addr string) int {
	for i, n := range s.nodes {
		if n.Addr() == addr {
			return i
		}
	}
	return -1
}

// WaitFailover waits until every Sentinel names a node other than old as
// the primary and that node answers as a master, and returns its index: a
// failover after old was killed. It fails the test after StartTimeout.
func (s *RedisSentinel) WaitFailover(t testing.TB, old int) int {
	t.Helper()
	p := -1
	WaitFor(t, s.cfg.StartTimeout, func() bool {
		p = s.Primary()
		return p >= 0 && p != old && role(s.nodes[p].Addr()) == "master"
	}, "sentinels promote a node other than %d", old)
	return p
}

// WaitReplicated waits until the primary the Sentinels name (node 0 before
// they run) has every other running node as a replica online, each at
// the primary's replication offset. It fails the test after StartTimeout.
func (s *RedisSentinel) WaitReplicated(t testing.TB) {
	t.Helper()
	s.waitReplicas(t, s.cfg.StartTimeout, true)
}

// WaitReplicasOnline waits until the primary the Sentinels name has every
// other running node as a replica online, at any offset: writes that wait
// for a replica can be acknowledged again. Clients may keep writing
// meanwhile. It fails the test after timeout.
func (s *RedisSentinel) WaitReplicasOnline(t testing.TB, timeout time.Duration) {
	t.Helper()
	s.waitReplicas(t, timeout, false)
}

func (s *RedisSentinel) waitReplicas(t testing.TB, timeout time.Duration, atOffset bool) {
	t.Helper()
	var why string
	WaitFor(t, timeout, func() bool {
		why = s.replicated(atOffset)
		return why == ""
	}, "replicas online (at the primary's offset: %t; last: %s)", atOffset, &lazyString{&why})
}

// replicated returns "" when every running replica is online (and, with
// atOffset, at the primary's offset), else why not.
func (s *RedisSentinel) replicated(atOffset bool) string {
	p := 0
	if len(s.sentinels) > 0 {
		if p = s.Primary(); p < 0 {
			return "sentinels name no primary"
		}
	}
	want := 0
	for i, n := range s.nodes {
		if i != p && n.Running() {
			want++
		}
	}
	info, err := infoReplication(s.nodes[p].Addr())
	if err != nil {
		return err.Error()
	}
	if info["role"] != "master" {
		return fmt.Sprintf("node %d is a %s", p, info["role"])
	}
	online := 0
	for k, v := range info {
		if strings.HasPrefix(k, "slave") && strings.Contains(v, "state=online") &&
			(!atOffset || strings.Contains(v, ",offset="+info["master_repl_offset"]+",")) {
			online++
		}
	}
	if online != want {
		return fmt.Sprintf("%d of %d replicas online at offset %s: %v", online, want, info["master_repl_offset"], info)
	}
	return ""
}

// WaitHealthy waits until every running Sentinel names the same primary,
// knows every other node as a replica that is up and the other running
// Sentinels, and
// the replicas are in sync (WaitReplicated): a failover can start. It
// fails the test after StartTimeout.
func (s *RedisSentinel) WaitHealthy(t testing.TB) {
	t.Helper()
	var why string
	WaitFor(t, s.cfg.StartTimeout, func() bool {
		why = s.health()
		if why == "" {
			why = s.replicated(true)
		}
		return why == ""
	}, "sentinels of %s healthy (last: %s)", s.cfg.Master, &lazyString{&why})
}

// health returns "" when every running Sentinel sees the set whole, every
// node up.
func (s *RedisSentinel) health() string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	p := s.Primary()
	if p < 0 {
		return "sentinels name no primary"
	}
	replicas, peers := len(s.nodes)-1, -1
	for _, sn := range s.sentinels {
		if sn.Running() {
			peers++
		}
	}
	for i, sn := range s.sentinels {
		if !sn.Running() {
			continue
		}
		c := redis.NewSentinelClient(&redis.Options{Addr: sn.Addr(), MaxRetries: -1})
		m, err := c.Master(ctx, s.cfg.Master).Result()
		if err == nil && (m["flags"] != "master" || m["num-slaves"] != strconv.Itoa(replicas) ||
			m["num-other-sentinels"] != strconv.Itoa(peers)) {
			err = fmt.Errorf("sees the master as %s with %s replicas and %s other sentinels, want %d and %d",
				m["flags"], m["num-slaves"], m["num-other-sentinels"], replicas, peers)
		}
		if err == nil {
			var rs []map[string]string
			if rs, err = c.Replicas(ctx, s.cfg.Master).Result(); err == nil {
				for _, r := range rs {
					if r["flags"] != "slave" {
						err = fmt.Errorf("sees replica %s:%s as %s", r["ip"], r["port"], r["flags"])
					}
				}
			}
		}
		_ = c.Close()
		if err != nil {
			return fmt.Sprintf("sentinel %d: %v", i, err)
		}
	}
	return ""
}

// role returns the ROLE a server at addr answers ("master", "slave"), or
// "" when it does not answer.
func role(addr string) string {
	info, err := infoReplication(addr)
	if err != nil {
		return ""
	}
	return info["role"]
}

// infoReplication returns the fields of INFO replication of the server at
// addr.
func infoReplication(addr string) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	out := map[string]string{}
	err := withNode(addr, func(rdb *redis.Client) error {
		info, err := rdb.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		for line := range strings.SplitSeq(info, "\r\n") {
			if k, v, ok := strings.Cut(line, ":"); ok {
				out[k] = v
			}
		}
		return nil
	})
	return out, err
}
