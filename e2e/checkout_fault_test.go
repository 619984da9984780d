package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/flows/checkout"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream/streamtest"
)

// The consistency workload of the checkout fault tests: one item with 100
// units, 1,000 users with 1 credit each, one order of the item per user,
// all checked out at once.
const (
	faultStock = 100
	faultUsers = 1000
)

// checkoutCluster is the checkout flow split over three dropstream
// processes on one redis-server with an append-only file fsynced at every
// write: the stock stage, the payment stage with the sweeper, and the API
// (whose checkout calls begin the attempts and send their commands). Each has a stable instance id, so a process restarted after
// a crash takes its consumers, and what they held, back at once.
type checkoutCluster struct {
	t     *testing.T
	bin   string
	redis *testenv.RedisServer
	rdb   redis.UniversalClient
	api   string // base URL
	args  map[string][]string
	procs map[string]*proc
	web   *http.Client
}

// clusterStages are the stages of each process of a checkout cluster (a
// second copy's name ends in "2").
var clusterStages = map[string][]string{
	"stock":   {checkout.StageStock},
	"payment": {checkout.StagePayment},
}

// startCheckoutCluster starts the processes; with copies 2, the stock
// process and the payment process run twice, as "stock2" and "payment2"
// beside "stock" and "payment".
func startCheckoutCluster(t *testing.T, bin string, copies int) *checkoutCluster {
	return startCheckoutClusterWith(t, bin, clusterOptions{Copies: copies})
}

// clusterOptions vary a checkout cluster.
type clusterOptions struct {
	// Copies of the stock and payment processes: 1 (default) or 2.
	Copies int
	// Fsync is Redis's AOF fsync policy. Default "always".
	Fsync string
	// Via returns the Redis URL the named process dials, given the
	// server's. Default: the server's (see toxicRedis).
	Via func(name, url string) string
	// StageArgs are added to the stage processes' arguments.
	StageArgs []string
	// RedisURL, when set, is a Redis the test started (a Sentinel set):
	// no redis-server of the cluster's own is started, and Fsync is unused.
	RedisURL string
	// Args are added to every process's arguments.
	Args []string
}

// startCheckoutClusterWith starts the processes as o says.
func startCheckoutClusterWith(t *testing.T, bin string, o clusterOptions) *checkoutCluster {
	t.Helper()
	if o.Fsync == "" {
		o.Fsync = "always"
	}
	if o.Via == nil {
		o.Via = func(_, url string) string { return url }
	}
	var srv *testenv.RedisServer
	url := o.RedisURL
	if url == "" {
		srv = testenv.StartRedis(t, testenv.RedisConfig{AppendOnly: true, AppendFsync: o.Fsync})
		url = srv.URL()
	}
	api := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	common := func(name string) []string {
		return append([]string{"run", "--redis-url", o.Via(name, url), "--log-level", "warn", "--instance", name}, o.Args...)
	}
	stage := func(name, stages string) []string {
		return append(append(common(name), "--api-addr", "", "--stages", stages), o.StageArgs...)
	}
	c := &checkoutCluster{t: t, bin: bin, redis: srv, rdb: dial(t, url), api: "http://" + api, procs: map[string]*proc{},
		web: &http.Client{Timeout: time.Minute},
		args: map[string][]string{
			"stock":   stage("stock", "checkout-stock"),
			"payment": stage("payment", "checkout-payment,checkout-sweeper"),
			// The workload's one client writes faster than a caller may by default.
			"api": append(common("api"), "--api-addr", api, "--stages", "none", "--api-limits", "off"),
		}}
	names := []string{"stock", "payment", "api"}
	if o.Copies == 2 {
		c.args["stock2"] = stage("stock2", "checkout-stock")
		c.args["payment2"] = stage("payment2", "checkout-payment")
		names = append(names, "stock2", "payment2")
	}
	for _, name := range names {
		c.start(name)
	}
	return c
}

// start starts the named process and waits until it serves: its stages
// read their streams, or its API answers.
func (c *checkoutCluster) start(name string) {
	c.t.Helper()
	args := append([]string(nil), c.args[name]...)
	if name != "api" {
		// "stage started" is logged at info.
		args = append(args, "--log-level", "info")
	}
	p := startProc(c.t, c.bin, name, args...)
	c.procs[name] = p
	if stages, ok := clusterStages[strings.TrimSuffix(name, "2")]; ok {
		p.waitStarted(c.t, stages...)
		return
	}
	testenv.WaitFor(c.t, 30*time.Second, func() bool {
		resp, err := c.web.Get(c.api + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, "%s answers", name)
}

// crash kills the named process with SIGKILL and starts it again at once,
// under the same instance id.
func (c *checkoutCluster) crash(name string) {
	c.t.Helper()
	c.procs[name].kill()
	start := time.Now()
	c.start(name)
	c.t.Logf("%s killed and serving again after %s", name, time.Since(start).Round(time.Millisecond))
}

// restart ends the named process with SIGTERM, checks that it left by
// itself, with status 0, within bound — it stopped reading, finished and
// acknowledged its batch — and starts it again.
func (c *checkoutCluster) restart(name string, bound time.Duration) {
	c.t.Helper()
	p := c.procs[name]
	start := time.Now()
	p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if code := p.cmd.ProcessState.ExitCode(); code != 0 {
			c.t.Errorf("%s left with status %d after SIGTERM, want 0", name, code)
		}
	case <-time.After(bound):
		c.t.Errorf("%s still running %s after SIGTERM", name, bound)
		p.kill()
	}
	left := time.Since(start)
	c.start(name)
	c.t.Logf("%s left %s after SIGTERM and serves again", name, left.Round(time.Millisecond))
}

// call sends a request to the API and decodes a JSON answer into out.
func (c *checkoutCluster) call(method, path string, out any) (int, error) {
	req, err := http.NewRequest(method, c.api+path, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.web.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, out); err != nil {
			return 0, fmt.Errorf("%s %s: %w: %s", method, path, err, b)
		}
	}
	return resp.StatusCode, nil
}

// must calls the API until it answers 200, retrying transport errors and
// 5xx answers (a process or Redis restarting) for up to a minute.
func (c *checkoutCluster) must(method, path string, out any) {
	c.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		code, err := c.call(method, path, out)
		if err == nil && code == http.StatusOK {
			return
		}
		if (err == nil && code < 500) || time.Now().After(deadline) {
			c.t.Fatalf("%s %s = %d, %v; want 200", method, path, code, err)
		}
		<-time.After(50 * time.Millisecond) // client retry pause
	}
}

// checkoutWorkload is the set-up of the consistency workload.
type checkoutWorkload struct {
	item   string
	orders []string // orders[i] belongs to user i
}

func (c *checkoutCluster) setUp() checkoutWorkload {
	c.t.Helper()
	var item struct {
		ItemID string `json:"item_id"`
	}
	c.must("POST", "/stock/item/create/1", &item)
	c.must("POST", "/stock/add/"+item.ItemID+"/"+strconv.Itoa(faultStock), nil)
	c.must("POST", "/payment/batch_init/"+strconv.Itoa(faultUsers)+"/1", nil)
	w := checkoutWorkload{item: item.ItemID, orders: make([]string, faultUsers)}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < faultUsers; i = int(next.Add(1)) - 1 {
				var o struct {
					OrderID string `json:"order_id"`
				}
				c.must("POST", "/orders/create/"+strconv.Itoa(i), &o)
				c.must("POST", "/orders/addItem/"+o.OrderID+"/"+item.ItemID, nil)
				w.orders[i] = o.OrderID
			}
		})
	}
	wg.Wait()
	return w
}

// checkoutTally is what the clients of a run saw.
type checkoutTally struct {
	paid, refused, answered atomic.Int64
	// unavailable counts 503 answers, other5xx the other 5xx answers and
	// transport errors the calls that got no answer: all are retried.
	unavailable, other5xx, transport atomic.Int64
}

// checkoutAll checks every order out at once and returns each order's
// final status (0: none within 2 minutes, an error of the test). A call
// that gets no final answer (200 or 400) is sent again after a short
// pause: checking out again joins the running attempt.
func (c *checkoutCluster) checkoutAll(w checkoutWorkload, tally *checkoutTally) []int {
	final := make([]int, len(w.orders))
	var wg sync.WaitGroup
	for i, id := range w.orders {
		wg.Go(func() {
			deadline := time.Now().Add(2 * time.Minute)
			for {
				code, err := c.call("POST", "/orders/checkout/"+id, nil)
				switch {
				case err != nil:
					tally.transport.Add(1)
				case code == http.StatusOK || code == http.StatusBadRequest:
					map[int]*atomic.Int64{200: &tally.paid, 400: &tally.refused}[code].Add(1)
					final[i] = code
					tally.answered.Add(1)
					return
				case code == http.StatusServiceUnavailable:
					tally.unavailable.Add(1)
				default:
					tally.other5xx.Add(1)
				}
				if time.Now().After(deadline) {
					c.t.Errorf("checkout of %s: no final answer within 2 minutes (last %d, %v)", id, code, err)
					return
				}
				<-time.After(50 * time.Millisecond) // client retry pause
			}
		})
	}
	wg.Wait()
	return final
}

// soldInRedis returns the units of the item sold, read from its hash.
func (c *checkoutCluster) soldInRedis(w checkoutWorkload) int64 {
	c.t.Helper()
	stock, err := c.rdb.HGet(context.Background(), checkout.NewKeys(8).Item(w.item), "stock").Int64()
	if err != nil {
		c.t.Fatalf("stock of %s: %v", w.item, err)
	}
	return faultStock - stock
}

// sold returns the units of the item sold: the stock taken from it.
func (c *checkoutCluster) sold(w checkoutWorkload) int64 {
	c.t.Helper()
	var item struct {
		Stock int64 `json:"stock"`
	}
	c.must("GET", "/stock/find/"+w.item, &item)
	return faultStock - item.Stock
}

// verify checks the outcome users would check: every checkout answered,
// exactly the stock sold and as many 200s, the credit spent equal to the
// units sold, and no attempt given up (a part recorded abandoned) — the
// crash was absorbed by the restarted process, not by the callers' wait.
func (c *checkoutCluster) verify(w checkoutWorkload, tally *checkoutTally) {
	c.t.Helper()
	ctx := context.Background()
	if n := tally.answered.Load(); n != faultUsers {
		c.t.Errorf("%d checkouts answered, want %d", n, faultUsers)
	}
	if n := tally.paid.Load(); n != faultStock {
		c.t.Errorf("%d checkouts answered 200, want %d", n, faultStock)
	}
	if n := c.sold(w); n != faultStock {
		c.t.Errorf("%d units sold, want %d", n, faultStock)
	}
	keys := checkout.NewKeys(8)
	var credit int64
	pipe := c.rdb.Pipeline()
	creditCmds := make([]*redis.StringCmd, faultUsers)
	trCmds := make([]*redis.StringCmd, faultUsers)
	for i, id := range w.orders {
		creditCmds[i] = pipe.HGet(ctx, keys.User(strconv.Itoa(i)), "credit")
		trCmds[i] = pipe.HGet(ctx, keys.Order(id), "tr")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		c.t.Fatal(err)
	}
	givenUp := 0
	for i, id := range w.orders {
		n, err := creditCmds[i].Int64()
		if err != nil {
			c.t.Fatalf("credit of user %d: %v", i, err)
		}
		credit += n
		tr, _ := trCmds[i].Int64()
		for a := int64(1); a <= tr; a++ {
			saga, err := c.rdb.HGetAll(ctx, keys.Saga(id, a)).Result()
			if err != nil {
				c.t.Fatal(err)
			}
			for f, v := range saga {
				if strings.HasPrefix(f, "r:") && v == "abandoned" {
					givenUp++
					break
				}
			}
		}
	}
	if spent := int64(faultUsers) - credit; spent != c.sold(w) {
		c.t.Errorf("credit spent %d, units sold %d: want them equal", spent, c.sold(w))
	}
	if givenUp != 0 {
		c.t.Errorf("%d checkout attempts given up, want none", givenUp)
	}
	if n := tally.other5xx.Load(); n != 0 {
		c.t.Errorf("%d answers were a 5xx other than 503: an outage must answer 503 with Retry-After", n)
	}
	// Every entry of every saga stream is accounted for by its groups:
	// acknowledged, dead-lettered, dropped, pending or not yet read.
	topics := checkout.NewTopics(8)
	streamtest.AssertConserved(c.t, c.rdb, topics.Stock, checkout.StageStock)
	streamtest.AssertConserved(c.t, c.rdb, topics.Payment, checkout.StagePayment)
	streamtest.AssertConserved(c.t, c.rdb, topics.Sagas, checkout.StageHistory)
	c.t.Logf("answered %d (200: %d, 400: %d); retried: %d × 503, %d × other 5xx, %d without an answer",
		tally.answered.Load(), tally.paid.Load(), tally.refused.Load(), tally.unavailable.Load(), tally.other5xx.Load(), tally.transport.Load())
}

// openAttempts counts the checkout attempts not yet final.
func (c *checkoutCluster) openAttempts() int64 {
	c.t.Helper()
	keys := checkout.NewKeys(8)
	var n int64
	for p := range 8 {
		m, err := c.rdb.ZCard(context.Background(), keys.Open(p)).Result()
		if err != nil {
			c.t.Fatal(err)
		}
		n += m
	}
	return n
}

// TestCheckout_faultsUnderTheConsistencyWorkload runs 1,000 concurrent
// checkouts of 100 units over three dropstream processes and, once 30
// units are sold, kills one part with SIGKILL and restarts it at once:
// the stock stage's process, the payment stage's, the API's, or
// Redis (restarted from its append-only file); or, with two copies of
// each stage process, restarts every copy in turn with SIGTERM (a rolling
// restart). Each run must end with
// every checkout answered, exactly 100 units sold, the credit spent equal
// to the units sold, and no checkout given up.
func TestCheckout_faultsUnderTheConsistencyWorkload(t *testing.T) {
	bin := buildBinary(t)
	for _, fault := range []string{"stock", "payment", "api", "redis", "rolling"} {
		t.Run(fault, func(t *testing.T) {
			copies := 1
			if fault == "rolling" {
				copies = 2
			}
			c := startCheckoutCluster(t, bin, copies)
			w := c.setUp()
			var tally checkoutTally
			done := make(chan struct{})
			go func() { defer close(done); c.checkoutAll(w, &tally) }()
			// Read from Redis, not through the API: an answer of the API,
			// busy with the workload, would come after much of the run.
			// Attempts begin as the busy API gets to them and close soon
			// after, so none may be open at one instant of a run still
			// going: the fault waits for a moment with attempts open, or
			// for the run's end, which fails below.
			var open int64
			testenv.WaitFor(t, time.Minute, func() bool {
				if c.soldInRedis(w) < 30 {
					return false
				}
				open = c.openAttempts()
				return open > 0 || tally.answered.Load() == faultUsers
			}, "30 units sold")
			if open == 0 || tally.answered.Load() == faultUsers {
				t.Fatalf("%d attempts open, %d checkouts answered just before the fault: the fault came after the run", open, tally.answered.Load())
			}
			switch fault {
			case "redis":
				c.redis.Kill()
				c.redis.Restart(t)
				t.Logf("redis killed and restarted")
			case "rolling":
				// Each copy in turn, the other one serving meanwhile.
				for _, name := range []string{"stock", "stock2", "payment", "payment2"} {
					c.restart(name, 15*time.Second)
				}
			default:
				c.crash(fault)
			}
			<-done
			c.verify(w, &tally)
		})
	}
}
