package checkout_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dropstream/dropstream/flows/checkout"
	"github.com/dropstream/dropstream/stream"
)

// startStages runs the named stages of e's service until the test ends.
func (e *env) startStages(t *testing.T, names ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	tel := stream.Telemetry{Logger: quiet()}
	for _, name := range names {
		r, err := stream.NewRunner(e.rdb, stage(t, e.svc, name), tel)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { _ = r.Run(ctx) })
	}
}

// errorCode is the code of a JSON error answer.
func errorCode(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// eventually polls cond until it holds or 20 s have passed.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// finalCheckout checks an order out until the answer is not
// "checkout_pending" (a loaded machine may outlast the flow's timeout).
func finalCheckout(t *testing.T, e *env, order string) (int, map[string]any) {
	t.Helper()
	var code int
	var out map[string]any
	eventually(t, "a final checkout answer", func() bool {
		var err error
		code, out, err = e.call(t, "POST", "/orders/checkout/"+order)
		return err == nil && errorCode(out) != "checkout_pending"
	})
	return code, out
}

// shop is one item (stock 10, price 3), one user and an order of qty of
// the item.
type shop struct{ item, user, order string }

func newShop(t *testing.T, e *env, credit, qty int) shop {
	t.Helper()
	s := shop{item: str(t, e.must(t, 200, "POST", "/stock/item/create/3"), "item_id"),
		user: str(t, e.must(t, 200, "POST", "/payment/create_user"), "user_id")}
	e.must(t, 200, "POST", "/stock/add/"+s.item+"/10")
	e.must(t, 200, "POST", "/payment/add_funds/"+s.user+"/"+itoa(credit))
	s.order = str(t, e.must(t, 200, "POST", "/orders/create/"+s.user), "order_id")
	e.must(t, 200, "POST", "/orders/addItem/"+s.order+"/"+s.item+"/"+itoa(qty))
	return s
}

// expect checks the shop's stock, credit and paid flag.
func (s shop) expect(t *testing.T, e *env, stock, credit int64, paid bool) {
	t.Helper()
	gotStock := num(t, e.must(t, 200, "GET", "/stock/find/"+s.item), "stock")
	gotCredit := num(t, e.must(t, 200, "GET", "/payment/find_user/"+s.user), "credit")
	gotPaid, _ := e.must(t, 200, "GET", "/orders/find/"+s.order)["paid"].(bool)
	if gotStock != stock || gotCredit != credit || gotPaid != paid {
		t.Errorf("stock %d, credit %d, paid %v; want %d, %d, %v", gotStock, gotCredit, gotPaid, stock, credit, paid)
	}
}

func TestCheckout_timedOutCallAnswers400AndTheNextCallTheOutcome(t *testing.T) {
	tests := []struct {
		name          string
		credit        int
		code          int
		stock, remain int64
		paid          bool
		status        string // of the timed-out attempt
	}{
		{"paid", 10, 200, 8, 4, true, checkout.StatusSucceeded},
		{"credit short, compensated", 5, 400, 10, 5, false, checkout.StatusFailed},
	}
	for _, b := range backends() {
		for _, tc := range tests {
			t.Run(b.name+"/"+tc.name, func(t *testing.T) {
				e := newEnv(t, b.url(t), envOptions{noStages: true, timeout: 300 * time.Millisecond})
				s := newShop(t, e, tc.credit, 2)
				code, out, err := e.call(t, "POST", "/orders/checkout/"+s.order)
				if err != nil || code != 400 || errorCode(out) != "checkout_pending" {
					t.Fatalf("checkout with no stages = %d %v, %v; want 400 checkout_pending", code, out, err)
				}
				// The saga waits for the stages, then completes or compensates;
				// checking out again answers its outcome.
				e.startStages(t, checkout.StageOrder, checkout.StageStock, checkout.StagePayment)
				code, got := finalCheckout(t, e, s.order)
				if code != tc.code || (code == 400 && errorCode(got) != "checkout_failed") {
					t.Fatalf("checkout again = %d %v; want %d", code, got, tc.code)
				}
				s.expect(t, e, tc.stock, tc.remain, tc.paid)
				keys := e.svc.Store().Keys()
				if st := e.rdb.HGet(context.Background(), keys.Saga(s.order, 1), "status").Val(); st != tc.status {
					t.Errorf("the timed-out attempt ended %q, want %q", st, tc.status)
				}
			})
		}
	}
}

func TestSweep_lostCommandIsSentAgainAndTheSagaIsPaid(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			e := newEnv(t, b.url(t), envOptions{noStages: true, timeout: 200 * time.Millisecond})
			s := newShop(t, e, 10, 2)
			e.startStages(t, checkout.StageOrder)
			if code, out, _ := e.call(t, "POST", "/orders/checkout/"+s.order); code != 400 || errorCode(out) != "checkout_pending" {
				t.Fatalf("checkout = %d %v; want 400 checkout_pending", code, out)
			}
			pay := e.svc.Topics().Payment
			p := pay.Partition(s.user)
			eventually(t, "the payment command", func() bool { return e.rdb.XLen(ctx, pay.Stream(p)).Val() == 1 })
			// The payment command is lost, as if dead-lettered.
			if err := e.rdb.XTrimMaxLen(ctx, pay.Stream(p), 0).Err(); err != nil {
				t.Fatal(err)
			}
			e.startStages(t, checkout.StageStock, checkout.StagePayment)
			eventually(t, "the stock outcome", func() bool {
				m, _ := e.rdb.HGetAll(ctx, e.svc.Store().Keys().Saga(s.order, 1)).Result()
				return len(m["r:stock."+itoa(e.svc.Store().Keys().Partition(s.item))]) > 0
			})
			st, err := e.svc.Sweep(ctx, time.Now())
			if err != nil || st.Stale != 0 {
				t.Fatalf("sweep before SweepAge = %+v, %v; want nothing stale", st, err)
			}
			st, err = e.svc.Sweep(ctx, time.Now().Add(e.svc.Config().SweepAge+time.Second))
			if err != nil || st != (checkout.SweepStats{Stale: 1, Resent: 1}) {
				t.Fatalf("sweep = %+v, %v; want 1 stale attempt, 1 command sent again", st, err)
			}
			eventually(t, "the order paid", func() bool {
				o, _ := e.svc.Store().FindOrder(ctx, s.order)
				return o.Paid
			})
			s.expect(t, e, 8, 4, true)
			e.must(t, 200, "POST", "/orders/checkout/"+s.order)
			st, err = e.svc.Sweep(ctx, time.Now().Add(e.svc.Config().AbandonAge+time.Second))
			if err != nil || st != (checkout.SweepStats{}) {
				t.Errorf("sweep after the saga finished = %+v, %v; want nothing left open", st, err)
			}
			s.expect(t, e, 8, 4, true)
		})
	}
}

func TestSweep_silentPartIsAbandonedAndCompensated(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			e := newEnv(t, b.url(t), envOptions{noStages: true, timeout: 200 * time.Millisecond})
			s := newShop(t, e, 10, 2)
			keys := e.svc.Store().Keys()
			// No payment stage: the payment part stays silent.
			e.startStages(t, checkout.StageOrder, checkout.StageStock)
			if code, out, _ := e.call(t, "POST", "/orders/checkout/"+s.order); code != 400 || errorCode(out) != "checkout_pending" {
				t.Fatalf("checkout = %d %v; want 400 checkout_pending", code, out)
			}
			eventually(t, "the stock taken", func() bool {
				return e.rdb.HGet(ctx, keys.Saga(s.order, 1), "r:stock."+itoa(keys.Partition(s.item))).Val() == "ok"
			})
			s.expect(t, e, 8, 10, false)
			st, err := e.svc.Sweep(ctx, time.Now().Add(e.svc.Config().AbandonAge+time.Second))
			if err != nil || st != (checkout.SweepStats{Stale: 1, Resent: 2, Abandoned: 1}) {
				t.Fatalf("sweep = %+v, %v; want the payment abandoned and both parts compensated", st, err)
			}
			eventually(t, "the stock given back", func() bool {
				return e.rdb.HGet(ctx, keys.Saga(s.order, 1), "c:stock."+itoa(keys.Partition(s.item))).Val() == "ok"
			})
			s.expect(t, e, 10, 10, false)
			if st := e.rdb.HGet(ctx, keys.Saga(s.order, 1), "status").Val(); st != checkout.StatusCompensating {
				t.Fatalf("saga %s before the payment stage confirms, want compensating", st)
			}
			// The payment stage comes back: the late payment applies and is
			// undone by its compensation, and the attempt fails.
			e.startStages(t, checkout.StagePayment)
			eventually(t, "the attempt failed", func() bool {
				return e.rdb.HGet(ctx, keys.Saga(s.order, 1), "status").Val() == checkout.StatusFailed
			})
			s.expect(t, e, 10, 10, false)
			if r := e.rdb.HGet(ctx, keys.Saga(s.order, 1), "reason").Val(); r != "no answer from pay in time" {
				t.Errorf("reason %q", r)
			}
			// A new attempt, with every stage running, pays.
			if code, out := finalCheckout(t, e, s.order); code != 200 {
				t.Fatalf("checkout after the failed attempt = %d %v", code, out)
			}
			s.expect(t, e, 8, 4, true)
		})
	}
}
