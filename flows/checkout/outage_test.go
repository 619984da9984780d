package checkout_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/internal/testenv"
)

// reply is what a client got for one call.
type reply struct {
	code       int // 0: no answer
	errCode    string
	retryAfter string
	err        error
}

// send sends a request and reads the status, the error envelope's
// code and the Retry-After header.
func (e *env) send(method, path string) reply {
	req, err := http.NewRequest(method, e.base+path, nil)
	if err != nil {
		return reply{err: err}
	}
	resp, err := e.http.Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	a := reply{code: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), err: err}
	var env struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &env) == nil {
		a.errCode = env.Error.Code
	}
	return a
}

// checkoutEach checks every order of s out at once and returns, per order,
// the last answer. With retry false each order gets one call, as the
// public benchmark's client sends them; with retry true a call without a
// final answer (200 or 4xx) is sent again after a pause, for up to a
// minute.
func checkoutEach(e *env, s scenario, retry bool, answered *atomic.Int64) []reply {
	out := make([]reply, len(s.orders))
	var wg sync.WaitGroup
	for i, id := range s.orders {
		wg.Go(func() {
			deadline := time.Now().Add(time.Minute)
			for {
				out[i] = e.send("POST", "/orders/checkout/"+id)
				final := out[i].err == nil && out[i].code < 500
				if final || !retry || time.Now().After(deadline) {
					break
				}
				<-time.After(100 * time.Millisecond) // client retry pause
			}
			answered.Add(1)
		})
	}
	wg.Wait()
	return out
}

// verifyAnswers checks what a user of the contract checks after a run:
// every checkout answered 200 or 400; an order answered 200 is paid, its
// user charged, and exactly one of its attempts stands in both ledgers
// (applied, not compensated); an order answered 400 is unpaid, its user
// not charged, and none of its attempts stands; the item's stock is not
// negative and the units sold equal the orders paid and the credit spent.
func verifyAnswers(t *testing.T, e *env, s scenario, answers []reply) {
	t.Helper()
	ctx := context.Background()
	keys := e.svc.Store().Keys()
	byCode := map[int]int{}
	paid, spent := 0, int64(0)
	for i, id := range s.orders {
		a := answers[i]
		byCode[a.code]++
		if a.err != nil || (a.code != 200 && a.code != 400) {
			t.Errorf("checkout of order %s answered %d %q, %v; want 200 or 400", id, a.code, a.errCode, a.err)
			continue
		}
		o, err := e.svc.Store().FindOrder(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		credit, err := e.svc.Store().FindUser(ctx, itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		spent += 1 - credit
		standing := 0
		for tr := int64(1); tr <= o.TrNum; tr++ {
			up, ip := keys.Partition(itoa(i)), keys.Partition(s.item)
			pay := stands(t, e, up, "payment", id, tr)
			stock := stands(t, e, ip, "stock", id, tr)
			if pay != stock {
				t.Errorf("order %s attempt %d: payment stands %v, stock stands %v", id, tr, pay, stock)
			}
			if pay && stock {
				standing++
			}
		}
		want := map[int]struct {
			paid     bool
			credit   int64
			standing int
		}{200: {true, 0, 1}, 400: {false, 1, 0}}[a.code]
		if o.Paid != want.paid || credit != want.credit || standing != want.standing {
			t.Errorf("order %s answered %d: paid %v, user credit %d, %d standing attempts of %d; want paid %v, credit %d, %d standing",
				id, a.code, o.Paid, credit, standing, o.TrNum, want.paid, want.credit, want.standing)
		}
		if o.Paid {
			paid++
		}
	}
	v, err := e.rdb.HMGet(ctx, keys.Item(s.item), "stock", "stocked", "sold").Result()
	if err != nil {
		t.Fatal(err)
	}
	var item [3]int64
	for i := range item {
		item[i], _ = strconv.ParseInt(v[i].(string), 10, 64)
	}
	stock, stocked, sold := item[0], item[1], item[2]
	if stock < 0 || stocked != int64(s.stock) || stock+sold != stocked {
		t.Errorf("item: stock %d + sold %d, stocked %d; want stock ≥ 0 and stock + sold = stocked = %d", stock, sold, stocked, s.stock)
	}
	if sold != int64(paid) || spent != int64(paid) {
		t.Errorf("%d units sold, %d credit spent, %d orders paid: want them equal", sold, spent, paid)
	}
	t.Logf("answers by status %v; %d orders paid, %d units sold, %d credit spent", byCode, paid, sold, spent)
}

// TestCheckout_redisRestartWithinTheWaitAnswersNo5xx runs the public
// consistency workload — 1,000 checkouts at once of one item with 100
// units, each sent once with no client retry — against a Redis with its
// append-only file fsynced at every write, kills Redis (SIGKILL) in the
// middle of the checkouts and restarts it at once. The outage is shorter
// than a checkout's wait, so no call may answer 5xx: every checkout answers
// 200 or 400, and the stored state agrees with the answers exactly.
func TestCheckout_redisRestartWithinTheWaitAnswersNo5xx(t *testing.T) {
	srv := testenv.StartRedis(t, testenv.RedisConfig{AppendOnly: true, AppendFsync: "always"})
	// The flow's default wait and retry budget; the client waits longer
	// than the call's deadline, on a machine loaded by other tests.
	e := newEnv(t, srv.URL(), envOptions{clientTimeout: 3 * time.Minute})
	s := setUp(t, e, stockStart, users)
	var answered atomic.Int64
	result := make(chan []reply, 1)
	go func() { result <- checkoutEach(e, s, false, &answered) }()
	testenv.WaitFor(t, 2*time.Minute, func() bool {
		stock, _, err := e.svc.Store().FindItem(context.Background(), s.item)
		return err == nil && stock <= 70
	}, "30 units of stock taken")
	open, before := openAttempts(t, e), answered.Load()
	killed := time.Now()
	srv.Kill()
	srv.Restart(t)
	t.Logf("redis killed with %d of %d checkouts answered, %d attempts open just before; serving again after %s",
		before, users, open, time.Since(killed).Round(time.Millisecond))
	if open == 0 || before == users {
		t.Fatalf("%d attempts open, %d checkouts answered just before the kill: the kill came after the run", open, before)
	}
	verifyAnswers(t, e, s, <-result)
}

// TestCheckout_redisOutageLongerThanTheDeadlineAnswers503AndConverges
// stops Redis for longer than every call's deadline: checkouts whose
// attempts had begun, and a call of every other route of the contract,
// answer 503 "unavailable" with Retry-After — no 500, and nothing half
// done. Once Redis is back, checking every order out again converges: each
// answers 200 or 400 and the stored state agrees with the answers exactly.
func TestCheckout_redisOutageLongerThanTheDeadlineAnswers503AndConverges(t *testing.T) {
	srv := testenv.StartRedis(t, testenv.RedisConfig{AppendOnly: true, AppendFsync: "always"})
	// No stage runs until Redis is back, so every attempt is still open
	// when its wait ends, and giving it up needs Redis.
	e := newEnv(t, srv.URL(), envOptions{noStages: true, timeout: 5 * time.Second, retryFor: time.Second})
	const orders, stock = 20, 10
	s := setUp(t, e, stock, orders)
	var answered atomic.Int64
	result := make(chan []reply, 1)
	go func() { result <- checkoutEach(e, s, false, &answered) }()
	testenv.WaitFor(t, 10*time.Second, func() bool { return openAttempts(t, e) == orders }, "every checkout's attempt begun")
	srv.Kill()

	// A call of every other route while Redis is down, all at once.
	routes := []struct{ method, path string }{
		{"GET", "/stock/find/" + s.item},
		{"POST", "/stock/add/" + s.item + "/5"},
		{"POST", "/stock/subtract/" + s.item + "/1"},
		{"POST", "/stock/item/create/3"},
		{"POST", "/payment/create_user"},
		{"GET", "/payment/find_user/0"},
		{"POST", "/payment/add_funds/0/5"},
		{"POST", "/payment/pay/0/1"},
		{"POST", "/orders/create/0"},
		{"GET", "/orders/find/" + s.orders[0]},
		{"POST", "/orders/addItem/" + s.orders[0] + "/" + s.item},
	}
	during := make([]reply, len(routes))
	var wg sync.WaitGroup
	for i, r := range routes {
		wg.Go(func() { during[i] = e.send(r.method, r.path) })
	}
	wg.Wait()
	checkouts := <-result
	for i, r := range routes {
		want503(t, r.method+" "+r.path, during[i])
	}
	for i, id := range s.orders {
		want503(t, "checkout of "+id, checkouts[i])
	}

	srv.Restart(t)
	startStageProcess(t, srv.URL())
	// The client's pool probes a Redis it could not dial once a second.
	testenv.WaitFor(t, 10*time.Second, func() bool { return e.send("GET", "/payment/find_user/0").code == 200 }, "the API serving again")
	// Nothing was changed by the calls answered 503: the user and the order
	// are as the set-up left them, but for the order's own checkout, whose
	// attempt had begun and may go on once Redis is back (paid, it spent
	// the user's one unit of credit).
	o := e.must(t, 200, "GET", "/orders/find/"+s.orders[0])
	want := int64(1)
	if paid, _ := o["paid"].(bool); paid {
		want = 0
	}
	if got := num(t, e.must(t, 200, "GET", "/payment/find_user/0"), "credit"); got != want {
		t.Errorf("user 0 credit %d after the outage (order %s paid: %v), want %d", got, s.orders[0], o["paid"], want)
	}
	if len(o["items"].([]any)) != 1 {
		t.Errorf("order %s has items %v after the outage, want one line", s.orders[0], o["items"])
	}
	answered.Store(0)
	verifyAnswers(t, e, s, checkoutEach(e, s, true, &answered))
}

// want503 checks an answer of a call made while Redis was down.
func want503(t *testing.T, what string, a reply) {
	t.Helper()
	if a.err != nil || a.code != http.StatusServiceUnavailable || a.errCode != "unavailable" || a.retryAfter != api.RetryAfterUnavailable {
		t.Errorf("%s while Redis is down: %d %q, Retry-After %q, %v; want 503 \"unavailable\" with Retry-After %s",
			what, a.code, a.errCode, a.retryAfter, a.err, api.RetryAfterUnavailable)
	}
}
