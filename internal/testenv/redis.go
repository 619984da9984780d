package testenv

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisURL returns the URL of a Redis database for this test alone.
//
// With DROPSTREAM_TEST_REDIS_URL set, it points at that shared server but at a
// database number of its own (cycling through all but the URL's database,
// allocated with INCR on the key "dropstream:testenv:next-db" in the URL's
// database; scripts/testenv.sh starts Redis with 1024), flushed before use and
// after the test, so packages tested in parallel do not see each other's keys.
// Tests must therefore never FLUSHALL. Otherwise it starts a private
// redis-server for the test (StartRedis with defaults) and returns its URL. If
// redis-server is not installed the test is skipped, or fails when Required.
func RedisURL(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvRedisURL)
	if base == "" {
		return StartRedis(t, RedisConfig{}).URL()
	}
	return isolatedDB(t, base)
}

func isolatedDB(t testing.TB, base string) string {
	t.Helper()
	opts, err := redis.ParseURL(base)
	if err != nil {
		t.Fatalf("testenv: %s: %v", EnvRedisURL, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := redis.NewClient(opts)
	defer c.Close()

	databases := 16
	if cfg, err := c.ConfigGet(ctx, "databases").Result(); err == nil {
		if n, err := strconv.Atoi(cfg["databases"]); err == nil {
			databases = n
		}
	}
	if databases < 2 {
		return base // nothing to isolate with
	}
	id, err := c.Incr(ctx, "dropstream:testenv:next-db").Result()
	if err != nil {
		t.Fatalf("testenv: redis at %s: %v", EnvRedisURL, err)
	}
	// Cycle through every database but the base one.
	db := int((id - 1) % int64(databases-1))
	if db >= opts.DB {
		db++
	}
	flush := func() error {
		o := *opts
		o.DB = db
		dc := redis.NewClient(&o)
		defer dc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return dc.FlushDB(ctx).Err()
	}
	if err := flush(); err != nil {
		t.Fatalf("testenv: flush redis db %d: %v", db, err)
	}
	t.Cleanup(func() {
		if err := flush(); err != nil {
			t.Errorf("testenv: flush redis db %d: %v", db, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("testenv: %s: %v", EnvRedisURL, err)
	}
	u.Path = "/" + strconv.Itoa(db)
	return u.String()
}

// RedisConfig configures a private redis-server started by StartRedis. The
// zero value is valid: no persistence at all.
type RedisConfig struct {
	// AppendOnly turns on the append-only file (--appendonly yes), so data
	// survives Kill and Restart. Default false: nothing is persisted (RDB
	// snapshots are always off, --save "").
	AppendOnly bool
	// AppendFsync is the AOF fsync policy: "everysec" (default), "always" or
	// "no". Only used with AppendOnly.
	AppendFsync string
	// StartTimeout bounds the wait for the server to answer PING after a start
	// or restart (including AOF loading). Default 15s.
	StartTimeout time.Duration
	// Binary is the redis-server executable. Default: $DROPSTREAM_TEST_REDIS_SERVER,
	// else "redis-server" looked up in PATH.
	Binary string
	// ExtraArgs are appended to the command line, e.g. {"--maxmemory", "64mb"}.
	ExtraArgs []string
}

// Validate reports whether the configuration is usable.
func (c RedisConfig) Validate() error {
	switch c.AppendFsync {
	case "", "everysec", "always", "no":
	default:
		return fmt.Errorf("testenv: RedisConfig.AppendFsync %q: want everysec, always or no", c.AppendFsync)
	}
	if c.StartTimeout < 0 {
		return fmt.Errorf("testenv: RedisConfig.StartTimeout %v is negative", c.StartTimeout)
	}
	return nil
}

func (c RedisConfig) withDefaults() RedisConfig {
	c.AppendFsync = cmp.Or(c.AppendFsync, "everysec")
	c.StartTimeout = cmp.Or(c.StartTimeout, 15*time.Second)
	if c.Binary == "" {
		c.Binary = os.Getenv(EnvRedisServer)
	}
	c.Binary = cmp.Or(c.Binary, "redis-server")
	return c
}

// RedisServer is a redis-server process owned by one test, listening on
// 127.0.0.1 with its data in a directory of t.TempDir(). Its methods are safe
// for concurrent use; the ones taking t must be called from the test goroutine.
type RedisServer struct {
	cfg  RedisConfig
	bin  string
	dir  string
	port int
	// conf is the config file of a Sentinel (its first argument, which it
	// rewrites); "" for a redis-server.
	conf string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// StartRedis starts a redis-server for the test and waits until it answers
// PING. The server is stopped when the test ends (t.Cleanup). A missing binary
// skips the test, or fails it when Required; any other start failure fails it,
// with the tail of the server log.
func StartRedis(t testing.TB, cfg RedisConfig) *RedisServer {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg = cfg.withDefaults()
	bin, err := exec.LookPath(cfg.Binary)
	if err != nil {
		missing(t, fmt.Sprintf("redis-server not available (%v)", err))
	}
	s := &RedisServer{cfg: cfg, bin: bin, dir: t.TempDir()}
	t.Cleanup(s.Stop)
	for attempt := 1; ; attempt++ {
		s.port = FreePort(t)
		err = s.start()
		if err == nil {
			return s
		}
		if attempt == 3 || !strings.Contains(err.Error(), "already in use") {
			t.Fatalf("testenv: start redis-server: %v", err)
		}
	}
}

// Addr returns the server's "127.0.0.1:port".
func (s *RedisServer) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL returns "redis://127.0.0.1:port/0".
func (s *RedisServer) URL() string { return "redis://" + s.Addr() + "/0" }

// Dir returns the server's working directory (AOF and log live there).
func (s *RedisServer) Dir() string { return s.dir }

// Running reports whether the server process is alive.
func (s *RedisServer) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runningLocked()
}

func (s *RedisServer) runningLocked() bool {
	if s.done == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// Kill ends the server with SIGKILL, like a crash, and returns once the
// process has exited. Data not yet in the AOF is lost. No-op if not running.
func (s *RedisServer) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.runningLocked() {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
}

// Freeze stops the server with SIGSTOP (see Freeze): it keeps its
// connections but answers nothing until Resume. A frozen server is resumed
// when the test ends, so it can be stopped.
func (s *RedisServer) Freeze(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	p := s.cmd.Process
	s.mu.Unlock()
	Freeze(t, p)
	t.Cleanup(s.Resume)
}

// Resume continues a frozen server (SIGCONT); a no-op otherwise.
func (s *RedisServer) Resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runningLocked() {
		_ = s.cmd.Process.Signal(syscall.SIGCONT)
	}
}

// Stop shuts the server down with SIGTERM (SIGKILL after 10s) and returns once
// the process has exited. No-op if not running; safe to call many times.
func (s *RedisServer) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
}

func (s *RedisServer) stopLocked() {
	if !s.runningLocked() {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
		<-s.done
	}
}

// Restart starts the server again on the same port and directory, so an AOF
// is replayed, and waits until it answers PING (a server still loading its
// AOF answers LOADING, which counts as not ready yet). A running server is
// stopped first with SIGTERM; call Kill before Restart to simulate a crash.
// It fails the test if the server does not come back within StartTimeout.
func (s *RedisServer) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	if err := s.start(); err != nil {
		t.Fatalf("testenv: restart redis-server on %s: %v", s.Addr(), err)
	}
}

func (s *RedisServer) args() []string {
	if s.conf != "" {
		return append([]string{s.conf, "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--dir", s.dir,
			"--daemonize", "no", "--logfile", ""}, s.cfg.ExtraArgs...)
	}
	args := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--save", "",
		"--daemonize", "no",
		"--logfile", "",
	}
	if s.cfg.AppendOnly {
		args = append(args, "--appendonly", "yes", "--appendfsync", s.cfg.AppendFsync)
	} else {
		args = append(args, "--appendonly", "no")
	}
	return append(args, s.cfg.ExtraArgs...)
}

func (s *RedisServer) logPath() string { return filepath.Join(s.dir, "redis.log") }

// start launches the process and waits until it is ready.
func (s *RedisServer) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	logf, err := os.OpenFile(s.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	cmd := exec.Command(s.bin, s.args()...)
	cmd.Dir = s.dir
	cmd.Stdout = logf
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("exec %s: %w", s.bin, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	s.cmd, s.done = cmd, done

	deadline := time.Now().Add(s.cfg.StartTimeout)
	var last error
	for {
		select {
		case <-done:
			return fmt.Errorf("redis-server exited during start-up; log tail:\n%s", tail(s.logPath(), 20))
		default:
		}
		if last = ping(s.Addr(), time.Second); last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			s.stopLocked()
			return fmt.Errorf("not ready after %v (last: %w); log tail:\n%s",
				s.cfg.StartTimeout, last, tail(s.logPath(), 20))
		}
		time.Sleep(pollInterval) // bounded readiness poll of an external process
	}
}

// ping sends a RESP PING and expects +PONG. A server loading its dataset
// answers -LOADING, which is returned as an error.
func ping(addr string, timeout time.Duration) error {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	line = strings.TrimSpace(line)
	if line != "+PONG" {
		return errors.New("PING answered " + line)
	}
	return nil
}

// tail returns the last n lines of the file at path, or why it cannot.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
