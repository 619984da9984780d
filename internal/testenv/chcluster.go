package testenv

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ClickHouseClusterConfig configures the ClickHouse cluster started by
// StartClickHouseCluster. The zero value is valid.
type ClickHouseClusterConfig struct {
	// Name is the cluster's name in remote_servers. Default "dropstream".
	Name string
	// Shards is the number of clickhouse-server processes, one shard each,
	// with one replica and no replication (no ZooKeeper). Default 2.
	Shards int
	// StartTimeout bounds the start of the servers. Default 60s.
	StartTimeout time.Duration
	// Binary is the clickhouse-server executable. Default
	// "clickhouse-server" looked up in PATH.
	Binary string
	// BaseConfig is the directory holding the config.xml and users.xml to
	// start from. Default /etc/clickhouse-server.
	BaseConfig string
}

// Validate reports whether the configuration is usable.
func (c ClickHouseClusterConfig) Validate() error {
	if c.Shards < 0 || c.Shards > 8 {
		return fmt.Errorf("testenv: ClickHouseClusterConfig.Shards %d out of range 0..8", c.Shards)
	}
	if c.Name != "" && !regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`).MatchString(c.Name) {
		return fmt.Errorf("testenv: ClickHouseClusterConfig.Name %q: want [a-z][a-z0-9_]*", c.Name)
	}
	if c.StartTimeout < 0 {
		return fmt.Errorf("testenv: ClickHouseClusterConfig.StartTimeout %v is negative", c.StartTimeout)
	}
	return nil
}

// WithDefaults returns c with zero fields set to their defaults.
func (c ClickHouseClusterConfig) WithDefaults() ClickHouseClusterConfig {
	c.Name = cmp.Or(c.Name, "dropstream")
	c.Shards = cmp.Or(c.Shards, 2)
	c.StartTimeout = cmp.Or(c.StartTimeout, 60*time.Second)
	c.Binary = cmp.Or(c.Binary, "clickhouse-server")
	c.BaseConfig = cmp.Or(c.BaseConfig, "/etc/clickhouse-server")
	return c
}

// ClickHouseCluster is a ClickHouse cluster of clickhouse-server processes
// owned by one test, each one shard of the cluster Name (declared in the
// remote_servers of every server), listening on 127.0.0.1.
type ClickHouseCluster struct {
	// Name is the cluster's name in remote_servers.
	Name   string
	bin    string
	shards []*chServer
	start  time.Duration // StartTimeout
}

type chServer struct {
	dir     string
	tcpPort int
	cmd     *exec.Cmd
	done    chan struct{}
}

// StartClickHouseCluster starts cfg.Shards clickhouse-server processes, each
// with its own data directory and free ports and a remote_servers entry
// naming all of them as the shards of cfg.Name, and waits until every one
// answers. They are stopped when the test ends. A missing binary or base
// configuration skips the test, or fails it when Required.
func StartClickHouseCluster(t testing.TB, cfg ClickHouseClusterConfig) *ClickHouseCluster {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg = cfg.WithDefaults()
	bin, err := exec.LookPath(cfg.Binary)
	if err != nil {
		missing(t, fmt.Sprintf("clickhouse-server not available (%v)", err))
	}
	base, err := os.ReadFile(filepath.Join(cfg.BaseConfig, "config.xml"))
	if err != nil {
		missing(t, fmt.Sprintf("clickhouse-server configuration not available (%v)", err))
	}
	users, err := os.ReadFile(filepath.Join(cfg.BaseConfig, "users.xml"))
	if err != nil {
		missing(t, fmt.Sprintf("clickhouse-server users.xml not available (%v)", err))
	}
	c := &ClickHouseCluster{Name: cfg.Name, bin: bin, start: cfg.StartTimeout}
	for range cfg.Shards {
		c.shards = append(c.shards, &chServer{dir: t.TempDir(), tcpPort: FreePort(t)})
	}
	remote := c.remoteServers()
	for _, s := range c.shards {
		if err := s.writeConfig(string(base), users, remote, FreePort(t), FreePort(t)); err != nil {
			t.Fatalf("testenv: clickhouse config: %v", err)
		}
	}
	t.Cleanup(c.stop)
	for i, s := range c.shards {
		if err := s.start(bin); err != nil {
			t.Fatalf("testenv: start clickhouse shard %d: %v", i, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.StartTimeout)
	defer cancel()
	for i, s := range c.shards {
		if err := s.waitReady(ctx); err != nil {
			t.Fatalf("testenv: clickhouse shard %d: %v", i, err)
		}
	}
	return c
}

// remoteServers returns the config.d file declaring the cluster.
func (c *ClickHouseCluster) remoteServers() string {
	var b strings.Builder
	b.WriteString("<yandex>\n<remote_servers>\n<" + c.Name + ">\n")
	for _, s := range c.shards {
		fmt.Fprintf(&b, "<shard><replica><host>127.0.0.1</host><port>%d</port></replica></shard>\n", s.tcpPort)
	}
	b.WriteString("</" + c.Name + ">\n</remote_servers>\n</yandex>\n")
	return b.String()
}

var (
	reTCPPort   = regexp.MustCompile(`<tcp_port>[0-9]*</tcp_port>`)
	reHTTPPort  = regexp.MustCompile(`<http_port>[0-9]*</http_port>`)
	reInterPort = regexp.MustCompile(`<interserver_http_port>[0-9]*</interserver_http_port>`)
	reDropLine  = regexp.MustCompile(`(?m)^.*<(tcp_port_secure|https_port)>.*$\n?|^[ \t]*<listen_host>[^<]*</listen_host>[ \t]*$\n?`)
)

// writeConfig writes config.xml (the base with this server's paths and
// ports, listening on 127.0.0.1 only), users.xml and config.d/cluster.xml.
func (s *chServer) writeConfig(base string, users []byte, remote string, httpPort, interPort int) error {
	for _, d := range []string{"data", "log", "config.d"} {
		if err := os.MkdirAll(filepath.Join(s.dir, d), 0o755); err != nil {
			return err
		}
	}
	cfg := strings.ReplaceAll(base, "/var/lib/clickhouse/", filepath.Join(s.dir, "data")+"/")
	cfg = strings.ReplaceAll(cfg, "/var/log/clickhouse-server/", filepath.Join(s.dir, "log")+"/")
	cfg = reDropLine.ReplaceAllString(cfg, "")
	if !reTCPPort.MatchString(cfg) {
		return fmt.Errorf("no <tcp_port> in the base config.xml")
	}
	cfg = reTCPPort.ReplaceAllString(cfg, fmt.Sprintf("<tcp_port>%d</tcp_port><listen_host>127.0.0.1</listen_host>", s.tcpPort))
	cfg = reHTTPPort.ReplaceAllString(cfg, fmt.Sprintf("<http_port>%d</http_port>", httpPort))
	cfg = reInterPort.ReplaceAllString(cfg, fmt.Sprintf("<interserver_http_port>%d</interserver_http_port>", interPort))
	files := map[string][]byte{
		"config.xml":           []byte(cfg),
		"users.xml":            users,
		"config.d/cluster.xml": []byte(remote),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(s.dir, name), body, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (s *chServer) start(bin string) error {
	logf, err := os.Create(filepath.Join(s.dir, "log", "stdout.log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, "--config-file="+filepath.Join(s.dir, "config.xml"))
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("exec %s: %w", bin, err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(s.done)
	}()
	return nil
}

// waitReady polls SELECT 1 until it succeeds, the server exits or ctx ends.
func (s *chServer) waitReady(ctx context.Context) error {
	var last error
	for {
		select {
		case <-s.done:
			return fmt.Errorf("exited during start-up; log tail:\n%s", tail(filepath.Join(s.dir, "log", "clickhouse-server.err.log"), 20))
		default:
		}
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		last = chExec(qctx, s.dsn("default"), "SELECT 1")
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready (last: %w); log tail:\n%s", last, tail(filepath.Join(s.dir, "log", "clickhouse-server.err.log"), 20))
		case <-time.After(50 * time.Millisecond): // bounded readiness poll of an external process
		}
	}
}

func (s *chServer) dsn(db string) string {
	return fmt.Sprintf("clickhouse://default:@127.0.0.1:%d/%s?dial_timeout=2s", s.tcpPort, db)
}

// stop kills every server and waits for it: the data is the test's alone
// and a graceful shutdown of clickhouse-server takes seconds.
func (c *ClickHouseCluster) stop() {
	for _, s := range c.shards {
		if s.cmd != nil {
			_ = s.cmd.Process.Signal(syscall.SIGKILL)
		}
	}
	for _, s := range c.shards {
		if s.cmd != nil {
			<-s.done
		}
	}
}

// Shards returns the number of shards.
func (c *ClickHouseCluster) Shards() int { return len(c.shards) }

// Database creates a database of a random name t_<16 hex digits> on every
// shard and returns, per shard, the native-protocol DSN of that database
// (clickhouse://default:@127.0.0.1:PORT/NAME). The databases are dropped
// when the test ends.
func (c *ClickHouseCluster) Database(t testing.TB) []string {
	t.Helper()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("testenv: random database name: %v", err)
	}
	name := "t_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dsns := make([]string, len(c.shards))
	for i, s := range c.shards {
		if err := chExec(ctx, s.dsn("default"), "CREATE DATABASE "+name); err != nil {
			t.Fatalf("testenv: shard %d: %v", i, err)
		}
		dsns[i] = s.dsn(name)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for i, s := range c.shards {
			if err := chExec(ctx, s.dsn("default"), "DROP DATABASE IF EXISTS "+name); err != nil {
				t.Errorf("testenv: shard %d: %v", i, err)
			}
		}
	})
	return dsns
}

// Port returns the native-protocol port of shard i.
func (c *ClickHouseCluster) Port(i int) int { return c.shards[i].tcpPort }

// Addr returns "127.0.0.1:port" of shard i.
func (c *ClickHouseCluster) Addr(i int) string {
	return "127.0.0.1:" + strconv.Itoa(c.shards[i].tcpPort)
}

// Kill kills shard i's clickhouse-server with SIGKILL (kill -9) and waits
// for it to exit: what it had not written to disk is lost, as in a crash.
func (c *ClickHouseCluster) Kill(i int) {
	s := c.shards[i]
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
}

// Restart starts shard i's clickhouse-server again, on the same data
// directory and ports, and waits until it answers (within StartTimeout).
func (c *ClickHouseCluster) Restart(t testing.TB, i int) {
	t.Helper()
	s := c.shards[i]
	if err := s.start(c.bin); err != nil {
		t.Fatalf("testenv: restart clickhouse shard %d: %v", i, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.start)
	defer cancel()
	if err := s.waitReady(ctx); err != nil {
		t.Fatalf("testenv: clickhouse shard %d: %v", i, err)
	}
}
