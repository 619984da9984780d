package checkout_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dropstream/dropstream/internal/testenv"
)

// The consistency set-up: one item with stock 100, 1000 users with
// credit 1, and one order of that item per user.
const (
	users      = 1000
	stockStart = 100
)

// scenario is a consistency set-up: one item with stock, users with credit
// 1, and one order of that item per user.
type scenario struct {
	item   string
	stock  int
	orders []string // orders[i] belongs to user i
}

func setUp(t *testing.T, e *env, stock, users int) scenario {
	t.Helper()
	item := str(t, e.must(t, 200, "POST", "/stock/item/create/1"), "item_id")
	e.must(t, 200, "POST", "/stock/add/"+item+"/"+itoa(stock))
	e.must(t, 200, "POST", "/payment/batch_init/"+itoa(users)+"/1")
	s := scenario{item: item, stock: stock, orders: make([]string, users)}
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range 32 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < users; i = int(next.Add(1)) - 1 {
				id := str(t, e.must(t, 200, "POST", "/orders/create/"+itoa(i)), "order_id")
				e.must(t, 200, "POST", "/orders/addItem/"+id+"/"+item)
				s.orders[i] = id
			}
		})
	}
	wg.Wait()
	return s
}

// checkoutAll checks every order out concurrently over HTTP. An answer
// other than 200 or 400 (a 500 while Redis is down) or a transport error
// is retried: checking out again joins the running attempt, answers 200 for
// a paid order, or starts a new attempt after a failed one. It returns the
// number of 200 answers and counts answers in answered.
func checkoutAll(t *testing.T, e *env, s scenario, answered *atomic.Int64) int {
	t.Helper()
	var ok atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(60 * time.Second)
	for _, id := range s.orders {
		wg.Go(func() {
			for {
				code, out, err := e.call(t, "POST", "/orders/checkout/"+id)
				if err == nil && (code == 200 || code == 400) {
					if code == 200 {
						ok.Add(1)
					}
					answered.Add(1)
					return
				}
				if time.Now().After(deadline) {
					t.Errorf("checkout of %s: no final answer within 60s: %d %v %v", id, code, out, err)
					return
				}
				<-time.After(50 * time.Millisecond) // client retry pause
			}
		})
	}
	wg.Wait()
	return int(ok.Load())
}

// verify checks the invariants: exactly s.stock (100) paid orders
// and as many successes, stock 0, total credit users − s.stock (900), and for every order the paid flag
// agrees with the payment and stock ledgers: a paid order has exactly one
// attempt whose payment and stock effects stand (applied, not compensated),
// an unpaid one has none, and its user's credit is 0 exactly when it is
// paid.
func verify(t *testing.T, e *env, s scenario, successes int) {
	t.Helper()
	ctx := context.Background()
	if successes != s.stock {
		t.Errorf("%d checkouts answered 200, want %d", successes, s.stock)
	}
	if got := num(t, e.must(t, 200, "GET", "/stock/find/"+s.item), "stock"); got != 0 {
		t.Errorf("stock %d, want 0", got)
	}
	var credit int64
	paid := 0
	keys := e.svc.Store().Keys()
	for i, id := range s.orders {
		o := e.must(t, 200, "GET", "/orders/find/"+id)
		c := num(t, e.must(t, 200, "GET", "/payment/find_user/"+itoa(i)), "credit")
		credit += c
		isPaid, _ := o["paid"].(bool)
		order, err := e.svc.Store().FindOrder(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		standing := 0
		for tr := int64(1); tr <= order.TrNum; tr++ {
			pay := stands(t, e, keys.Partition(itoa(i)), "payment", id, tr)
			stock := stands(t, e, keys.Partition(s.item), "stock", id, tr)
			if pay != stock {
				t.Errorf("order %s attempt %d: payment stands %v, stock stands %v", id, tr, pay, stock)
			}
			if pay && stock {
				standing++
			}
		}
		if isPaid {
			paid++
		}
		if want := map[bool]int{true: 1, false: 0}[isPaid]; standing != want || (c == 0) != isPaid {
			t.Errorf("order %s paid %v: %d standing attempts of %d, user credit %d", id, isPaid, standing, order.TrNum, c)
		}
	}
	if paid != s.stock {
		t.Errorf("%d orders paid, want %d", paid, s.stock)
	}
	if want := int64(len(s.orders) - s.stock); credit != want {
		t.Errorf("total credit %d, want %d", credit, want)
	}
}

// stands reports whether an effect was applied and not compensated,
// reading its ledger entries.
func stands(t *testing.T, e *env, p int, side, order string, tr int64) bool {
	t.Helper()
	ctx := context.Background()
	keys, nonce := e.svc.Store().Keys(), e.sagaField(order, tr, "nonce")
	f, _ := e.rdb.Get(ctx, keys.Ledger(p, side, order, tr, nonce, false)).Result()
	r, _ := e.rdb.Get(ctx, keys.Ledger(p, side, order, tr, nonce, true)).Result()
	return f == "ok" && r != "ok"
}

func TestCheckout_concurrentOrdersOverHTTPExactlyStockSucceed(t *testing.T) {
	// miniredis runs every script in a fresh Lua state, some ms each: it
	// gets a twentieth of the set-up.
	for _, b := range []struct {
		name         string
		url          func(t *testing.T) string
		stock, users int
	}{
		{"redis-server", func(t *testing.T) string { return testenv.RedisURL(t) }, stockStart, users},
		{"miniredis", miniredisURL, stockStart / 20, users / 20},
	} {
		t.Run(b.name, func(t *testing.T) {
			e := newEnv(t, b.url(t), envOptions{timeout: 30 * time.Second})
			start := time.Now()
			s := setUp(t, e, b.stock, b.users)
			t.Logf("set-up %s", time.Since(start))
			start = time.Now()
			var answered atomic.Int64
			n := checkoutAll(t, e, s, &answered)
			t.Logf("checkouts %s", time.Since(start))
			start = time.Now()
			verify(t, e, s, n)
			t.Logf("verify %s", time.Since(start))
		})
	}
}

func TestCheckout_stageProcessKilledMidRunConverges(t *testing.T) {
	url := testenv.RedisURL(t)
	e := newEnv(t, url, envOptions{noStages: true, timeout: 30 * time.Second})
	s := setUp(t, e, stockStart, users)
	child := startStageProcess(t, url)
	var answered atomic.Int64
	result := make(chan int, 1)
	go func() { result <- checkoutAll(t, e, s, &answered) }()
	testenv.WaitFor(t, 2*time.Minute, func() bool { // a loaded machine is slow to sell them
		stock, _, err := e.svc.Store().FindItem(context.Background(), s.item)
		return err == nil && stock <= 70
	}, "30 units of stock taken")
	child.kill()
	// Mid-run: with no stage running, no attempt can finish, so the open
	// ones were interrupted by the kill.
	open := openAttempts(t, e)
	t.Logf("stage process killed with %d of %d checkouts answered, %d attempts open", answered.Load(), users, open)
	if open == 0 {
		t.Fatal("no attempt open when the stage process was killed: the kill came after the run")
	}
	startStageProcess(t, url)
	verify(t, e, s, <-result)
}

// openAttempts counts the attempts that have not reached a final status.
func openAttempts(t *testing.T, e *env) int64 {
	t.Helper()
	keys := e.svc.Store().Keys()
	var n int64
	for p := range partitions {
		c, err := e.rdb.ZCard(context.Background(), keys.Open(p)).Result()
		if err != nil {
			t.Fatal(err)
		}
		n += c
	}
	return n
}

func TestCheckout_redisKilledAndRestartedMidRunConverges(t *testing.T) {
	srv := testenv.StartRedis(t, testenv.RedisConfig{AppendOnly: true, AppendFsync: "always"})
	e := newEnv(t, srv.URL(), envOptions{timeout: 30 * time.Second})
	s := setUp(t, e, stockStart, users)
	var answered atomic.Int64
	result := make(chan int, 1)
	go func() { result <- checkoutAll(t, e, s, &answered) }()
	testenv.WaitFor(t, 2*time.Minute, func() bool { // a loaded machine is slow to sell them
		stock, _, err := e.svc.Store().FindItem(context.Background(), s.item)
		return err == nil && stock <= 70
	}, "30 units of stock taken")
	open := openAttempts(t, e)
	srv.Kill()
	t.Logf("redis killed with %d of %d checkouts answered, %d attempts open just before", answered.Load(), users, open)
	if open == 0 {
		t.Fatal("no attempt open just before Redis was killed: the kill came after the run")
	}
	srv.Restart(t)
	verify(t, e, s, <-result)
}
