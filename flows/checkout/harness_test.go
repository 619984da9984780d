package checkout_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/clickhouse/clickhousetest"
	"github.com/dropstream/dropstream/flows/checkout"
	"github.com/dropstream/dropstream/flows/checkout/httpapi"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer/sink"
)

const partitions = 4

// Environment of the stage process started by startStageProcess.
const (
	envChildURL      = "CHECKOUT_TEST_CHILD_REDIS_URL"
	envChildConsumer = "CHECKOUT_TEST_CHILD_CONSUMER"
)

func TestMain(m *testing.M) {
	if url := os.Getenv(envChildURL); url != "" {
		os.Exit(runStageProcess(url, os.Getenv(envChildConsumer)))
	}
	os.Exit(m.Run())
}

// stageConfig makes redelivery quick in tests of a flow whose checkout
// timeout is timeout (0: the default): the give-up tests, whose waits are
// a few seconds, take over a crashed copy's work within half of them;
// longer waits keep the timings the flow derives from them.
func stageConfig(timeout time.Duration) stream.RunnerConfig {
	c := stream.RunnerConfig{Block: 100 * time.Millisecond, ErrorBackoff: 200 * time.Millisecond, MaxDeliveries: 20}
	if timeout > 0 && timeout < 10*time.Second {
		c.ClaimIdle, c.ClaimInterval, c.HandlerTimeout = timeout*2/5, timeout/20, timeout*3/10
		c.Retry = stream.RetryConfig{Disabled: true}
	}
	return c
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// runStageProcess runs the flow's stages until it is killed or terminated.
func runStageProcess(url, consumer string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	rdb, err := stream.Dial(ctx, url)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	tel := stream.Telemetry{Logger: quiet()}
	cfg := checkout.Config{Partitions: partitions, Stage: stageConfig(0)}
	cfg.Stage.Consumer = consumer
	svc, err := checkout.NewWith(rdb, stream.NewPublisher(rdb, tel), cfg, tel)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var wg sync.WaitGroup
	for _, s := range svc.Stages() {
		r, err := stream.NewRunner(rdb, s, tel)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		wg.Go(func() { _ = r.Run(ctx) })
	}
	wg.Wait()
	return 0
}

// stageProcess is the flow's stages in a child process.
type stageProcess struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// startStageProcess starts the stages in a child process (this test
// binary) with a fixed consumer name, so a restarted process first
// redelivers what the killed one left pending.
func startStageProcess(t *testing.T, url string) *stageProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChildURL+"="+url, envChildConsumer+"=child-"+t.Name())
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &stageProcess{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(p.kill)
	return p
}

// kill ends the process with SIGKILL and waits for it.
func (p *stageProcess) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// env is the flow served over HTTP, its stages in this process unless
// told otherwise.
type env struct {
	rdb  redis.UniversalClient
	svc  *checkout.Flow
	base string
	http *http.Client
}

type envOptions struct {
	noStages bool
	timeout  time.Duration // the flow's Config.Timeout
	retryFor time.Duration // the flow's Config.RetryFor
	tracer   trace.TracerProvider
	// clientTimeout bounds each HTTP call of the test's client (default
	// 60s).
	clientTimeout time.Duration
	// sendVia, when set, is the client the flow publishes its commands
	// through (its scripts still go through the env's own client).
	sendVia redis.UniversalClient
	// wait is the flow's Config.Wait.
	wait stream.ReplicaWait
}

func newEnv(t testing.TB, url string, opt envOptions) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	rdb, err := stream.Dial(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	tel := stream.Telemetry{Logger: quiet(), TracerProvider: opt.tracer, Propagator: propagation.TraceContext{}}
	sendVia := opt.sendVia
	if sendVia == nil {
		sendVia = rdb
	}
	svc, err := checkout.NewWith(rdb, stream.NewPublisher(sendVia, tel), checkout.Config{Partitions: partitions,
		Timeout: opt.timeout, RetryFor: opt.retryFor, Recheck: 200 * time.Millisecond, SweepInterval: time.Hour, Stage: stageConfig(opt.timeout),
		Wait: opt.wait}, tel)
	if err != nil {
		t.Fatal(err)
	}
	wg.Go(func() {
		if err := svc.Run(ctx); err != nil {
			t.Errorf("waiter: %v", err)
		}
	})
	if !opt.noStages {
		for _, s := range svc.Stages() {
			r, err := stream.NewRunner(rdb, s, tel)
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() { _ = r.Run(ctx) })
		}
	}
	srv, err := api.New(api.Config{Addr: "127.0.0.1:0", Logger: quiet(), TracerProvider: opt.tracer,
		RateLimit: api.RateLimitConfig{Disabled: true}}) // the load tests send thousands of checkouts
	if err != nil {
		t.Fatal(err)
	}
	httpapi.Register(srv, svc)
	wg.Go(func() {
		if err := srv.Listen(ctx); err != nil {
			t.Errorf("api: %v", err)
		}
	})
	select {
	case <-srv.Listening():
	case <-time.After(10 * time.Second):
		t.Fatal("api did not listen")
	}
	select {
	case <-svc.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("waiter did not subscribe")
	}
	tr := &http.Transport{MaxIdleConns: 2000, MaxIdleConnsPerHost: 2000}
	t.Cleanup(tr.CloseIdleConnections)
	clientTimeout := opt.clientTimeout
	if clientTimeout == 0 {
		clientTimeout = 60 * time.Second
	}
	return &env{rdb: rdb, svc: svc, base: "http://" + srv.Addr(), http: &http.Client{Transport: tr, Timeout: clientTimeout}}
}

func miniredisURL(t *testing.T) string { return "redis://" + miniredis.RunT(t).Addr() }

// backends are the Redis servers the HTTP tests run against.
func backends() []struct {
	name string
	url  func(t *testing.T) string
} {
	return []struct {
		name string
		url  func(t *testing.T) string
	}{{"miniredis", miniredisURL}, {"redis-server", func(t *testing.T) string { return testenv.RedisURL(t) }}}
}

// contractBackends are backends plus Redis Cluster, which proves that every
// script touches one slot. The cluster is shared: tests on it use random
// ids, or fixed ids they reset themselves.
func contractBackends() []struct {
	name string
	url  func(t *testing.T) string
} {
	return append(backends(), struct {
		name string
		url  func(t *testing.T) string
	}{"redis-cluster", func(t *testing.T) string { return testenv.RedisClusterURL(t) }})
}

// call sends a request and decodes the JSON answer into a map; it checks
// the content type of every answer with a body.
func (e *env) call(t testing.TB, method, path string) (int, map[string]any, error) {
	req, err := http.NewRequest(method, e.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := e.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	out := map[string]any{}
	if len(body) > 0 {
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			return resp.StatusCode, nil, fmt.Errorf("%s %s: content type %q, body %s", method, path, ct, body)
		}
		if err := json.Unmarshal(body, &out); err != nil {
			return resp.StatusCode, nil, fmt.Errorf("%s %s: body %s: %w", method, path, body, err)
		}
	}
	return resp.StatusCode, out, nil
}

// must sends a request that must answer want.
func (e *env) must(t testing.TB, want int, method, path string) map[string]any {
	t.Helper()
	code, out, err := e.call(t, method, path)
	if err != nil || code != want {
		t.Fatalf("%s %s = %d %v, %v; want %d", method, path, code, out, err, want)
	}
	return out
}

// num reads an integer field of a JSON answer.
func num(t testing.TB, m map[string]any, field string) int64 {
	t.Helper()
	f, ok := m[field].(float64)
	if !ok {
		t.Fatalf("field %q of %v is not a number", field, m)
	}
	return int64(f)
}

func str(t testing.TB, m map[string]any, field string) string {
	t.Helper()
	s, ok := m[field].(string)
	if !ok {
		t.Fatalf("field %q of %v is not a string", field, m)
	}
	return s
}

func itoa(n int) string { return strconv.Itoa(n) }

// runHistory opens a migrated ClickHouse database of the test's own and
// runs the flow's history stage into it (flushing every 20 ms) until the
// test ends.
func (e *env) runHistory(t *testing.T) *clickhouse.Client {
	t.Helper()
	ch := clickhousetest.Open(t)
	cfg := e.svc.HistoryConfig()
	// The flow's test runners time handlers out at 2s.
	cfg.FlushInterval, cfg.FlushTimeout = 20*time.Millisecond, time.Second
	hist, err := sink.NewHistory(ch, cfg, stream.Telemetry{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hist.Close() })
	r, err := stream.NewRunner(e.rdb, hist.Stage(), stream.Telemetry{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return ch
}
