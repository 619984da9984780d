package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"

	"github.com/dropstream/dropstream/flows/checkout/checkouttest"
	"github.com/dropstream/dropstream/internal/testenv"
)

// toxicRedis puts a Toxiproxy proxy, run in the test process, between
// each dropstream process and Redis, so network faults hit one process
// or all of them.
type toxicRedis struct {
	t       *testing.T
	srv     *toxiproxy.ApiServer
	mu      sync.Mutex
	proxies map[string]*toxiproxy.Proxy
}

func newToxicRedis(t *testing.T) *toxicRedis {
	return &toxicRedis{t: t, srv: toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop()), proxies: map[string]*toxiproxy.Proxy{}}
}

// via starts the proxy of the named process to the Redis at redisURL and
// returns the URL the process dials instead (a clusterOptions.Via).
func (x *toxicRedis) via(name, redisURL string) string {
	x.t.Helper()
	u, err := url.Parse(redisURL)
	if err != nil {
		x.t.Fatal(err)
	}
	p := toxiproxy.NewProxy(x.srv, name, "127.0.0.1:0", u.Host)
	if err := p.Start(); err != nil {
		x.t.Fatalf("toxiproxy %s: %v", name, err)
	}
	x.t.Cleanup(p.Stop)
	x.mu.Lock()
	x.proxies[name] = p
	x.mu.Unlock()
	u.Host = p.Listen
	return u.String()
}

// toxic adds a toxic, in both directions, to the proxies of the named
// processes (all of them when none is named) for d, then removes it.
func (x *toxicRedis) toxic(d time.Duration, kind string, attrs string, names ...string) {
	x.t.Helper()
	x.mu.Lock()
	var ps []*toxiproxy.Proxy
	for name, p := range x.proxies {
		if len(names) == 0 || contains(names, name) {
			ps = append(ps, p)
		}
	}
	x.mu.Unlock()
	for _, p := range ps {
		for _, dir := range []string{"upstream", "downstream"} {
			body := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"attributes":%s}`, kind+"_"+dir, kind, dir, attrs)
			if _, err := p.Toxics.AddToxicJson(strings.NewReader(body)); err != nil {
				x.t.Fatalf("toxiproxy %s: add %s: %v", p.Name, body, err)
			}
		}
	}
	<-time.After(d) // the fault's length
	for _, p := range ps {
		for _, dir := range []string{"upstream", "downstream"} {
			if err := p.Toxics.RemoveToxic(context.Background(), kind+"_"+dir); err != nil {
				x.t.Fatalf("toxiproxy %s: remove %s: %v", p.Name, kind, err)
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// fault is one fault of a schedule, injected while the clients run.
type fault struct {
	name string
	do   func(t *testing.T, c *checkoutCluster, x *toxicRedis)
}

func kill(name string) fault {
	return fault{"kill -9 " + name, func(t *testing.T, c *checkoutCluster, _ *toxicRedis) { c.crash(name) }}
}

var (
	killRedis = fault{"kill -9 redis", func(t *testing.T, c *checkoutCluster, _ *toxicRedis) {
		c.redis.Kill()
		c.redis.Restart(t)
	}}
	latency = fault{"toxiproxy latency 50±50ms, 5s", func(t *testing.T, _ *checkoutCluster, x *toxicRedis) {
		x.toxic(5*time.Second, "latency", `{"latency":50,"jitter":50}`)
	}}
	timeout = fault{"toxiproxy timeout: stock and payment links silent, closed after 2s", func(t *testing.T, _ *checkoutCluster, x *toxicRedis) {
		x.toxic(3*time.Second, "timeout", `{"timeout":2000}`, "stock", "payment")
	}}
	resetPeer = fault{"toxiproxy reset_peer after 300ms, 3s", func(t *testing.T, _ *checkoutCluster, x *toxicRedis) {
		x.toxic(3*time.Second, "reset_peer", `{"timeout":300}`)
	}}
	bandwidth = fault{"toxiproxy bandwidth 8 KB/s, 5s", func(t *testing.T, _ *checkoutCluster, x *toxicRedis) {
		x.toxic(5*time.Second, "bandwidth", `{"rate":8}`)
	}}
	// The consumer lease is 15s: the stock copy cut off loses it, and the
	// other copy claims its pending commands (claim idle 5s).
	cutOff = fault{"toxiproxy: stock cut off from redis 20s (longer than its 15s lease)", func(t *testing.T, _ *checkoutCluster, x *toxicRedis) {
		x.toxic(20*time.Second, "timeout", `{"timeout":0}`, "stock")
	}}
)

// linearRun runs the workload against a checkout cluster, injects the
// faults one after another — each once the clients have had gap more
// answers — settles the workload and checks its history.
func linearRun(t *testing.T, c *checkoutCluster, x *toxicRedis, gap int64, faults []fault) checkouttest.Result {
	t.Helper()
	ctx := context.Background()
	w, err := checkouttest.NewWorkload(ctx, c.api, checkouttest.WorkloadConfig{CallTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rec := w.Recorder()
	progress := func(n int64) {
		t.Helper()
		want := rec.Answered() + n
		testenv.WaitFor(t, 2*time.Minute, func() bool { return rec.Answered() >= want }, "%d more answers", n)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); w.Run(runCtx) }()
	start := time.Now()
	var names []string
	for _, f := range faults {
		progress(gap)
		t.Logf("fault at %s: %s", time.Since(start).Round(time.Millisecond), f.name)
		f.do(t, c, x)
		names = append(names, f.name)
	}
	progress(gap)
	stop()
	<-done
	if err := w.Settle(ctx, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	res := checkouttest.Check(t, rec.History())
	t.Logf("figure: %d operations, %d without an answer; %d faults (%s) in %s; %d anomalies; checker %s",
		res.Operations, res.Unknown, len(faults), strings.Join(names, "; "), time.Since(start).Round(time.Second),
		len(res.Anomalies), res.Elapsed.Round(time.Millisecond))
	return res
}

// toxicCluster starts a checkout cluster whose processes reach Redis
// through Toxiproxy, with two copies of each stage process and a claim
// idle of 5s, so a copy cut off has its work taken over.
func toxicCluster(t *testing.T, bin, fsync string) (*checkoutCluster, *toxicRedis) {
	x := newToxicRedis(t)
	c := startCheckoutClusterWith(t, bin, clusterOptions{Copies: 2, Fsync: fsync, Via: x.via,
		StageArgs: []string{"--claim-idle", "5s", "--handler-timeout", "1s"}})
	return c, x
}

// TestCheckout_LinearizableToxiproxyAndKills runs the combined fault
// schedule while 8 clients drive the contract: network faults between
// every process and Redis (latency, a silent link closed after a
// timeout, connections reset, a bandwidth limit), kill -9 of the API and
// of each stage's process with their restart, kill -9 of Redis restarted
// from its append-only file (fsync always), and the stock stage's
// process cut off from Redis longer than its lease. The checker must
// find the history linearizable.
func TestCheckout_LinearizableToxiproxyAndKills(t *testing.T) {
	c, x := toxicCluster(t, buildBinary(t), "always")
	res := linearRun(t, c, x, 200, []fault{latency, kill("stock"), resetPeer, kill("payment"), bandwidth, kill("api"), timeout, killRedis, cutOff})
	if !res.Linearizable() {
		t.Errorf("not linearizable under faults: %s", res)
	}
}

// TestCheckout_LinearizableFaultMatrix runs each fault alone, on a
// cluster of its own, three times in a run (a Redis crash under AOF
// everysec eight times), 2,000 answers apart; with AOF everysec, the acknowledged
// operations a Redis crash lost are listed, not failed. It takes about
// ten minutes: it runs with DROPSTREAM_FULL_MATRIX=1 (BENCHMARKS.md has
// its figures).
func TestCheckout_LinearizableFaultMatrix(t *testing.T) {
	if os.Getenv("DROPSTREAM_FULL_MATRIX") != "1" {
		t.Skip("the full fault matrix runs with DROPSTREAM_FULL_MATRIX=1")
	}
	bin := buildBinary(t)
	for _, tc := range []struct {
		name  string
		fsync string
		f     fault
		times int // default 3
	}{
		{"kill-api", "always", kill("api"), 0},
		{"kill-stock", "always", kill("stock"), 0},
		{"kill-payment", "always", kill("payment"), 0},
		{"kill-redis-always", "always", killRedis, 0},
		// A loss needs a kill while Redis postpones its AOF write.
		{"kill-redis-everysec", "everysec", killRedis, 8},
		{"toxiproxy-latency", "always", latency, 0},
		{"toxiproxy-timeout", "always", timeout, 0},
		{"toxiproxy-reset-peer", "always", resetPeer, 0},
		{"toxiproxy-bandwidth", "always", bandwidth, 0},
		{"toxiproxy-cut-off-past-lease", "always", cutOff, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, x := toxicCluster(t, bin, tc.fsync)
			faults := make([]fault, max(tc.times, 3))
			for i := range faults {
				faults[i] = tc.f
			}
			res := linearRun(t, c, x, 2000, faults)
			switch {
			case res.Undecided:
				t.Errorf("the checker could not decide: %s", res)
			case tc.fsync != "always":
				// Measured, not asserted: the anomalies above list them.
				t.Logf("AOF %s: %d keys show acknowledged operations lost", tc.fsync, len(res.Anomalies))
			case !res.Linearizable():
				t.Errorf("not linearizable under %s: %s", tc.f.name, res)
			}
		})
	}
}
