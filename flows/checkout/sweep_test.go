package checkout_test

import (
	"context"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/flows/checkout"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

func TestSweep_lostCommandIsSentAgainAndTheSagaIsPaid(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			e := newEnv(t, b.url(t), envOptions{noStages: true, timeout: 20 * time.Second})
			s := newShop(t, e, 10, 2)
			keys := e.svc.Store().Keys()
			e.leave(t, s.order, 1)
			pay := e.svc.Topics().Payment
			p := pay.Partition(s.user)
			testenv.WaitFor(t, 20*time.Second, func() bool { return e.rdb.XLen(ctx, pay.Stream(p)).Val() == 1 }, "the payment command")
			// The payment command is lost, as if dead-lettered.
			if err := e.rdb.XTrimMaxLen(ctx, pay.Stream(p), 0).Err(); err != nil {
				t.Fatal(err)
			}
			e.startStages(t, checkout.StageStock, checkout.StagePayment)
			testenv.WaitFor(t, 20*time.Second, func() bool { return e.sagaField(s.order, 1, "r:stock."+itoa(keys.Partition(s.item))) != "" },
				"the stock outcome")
			st, err := e.svc.Sweep(ctx, time.Now())
			if err != nil || st.Stale != 0 {
				t.Fatalf("sweep before SweepAge = %+v, %v; want nothing stale", st, err)
			}
			st, err = e.svc.Sweep(ctx, time.Now().Add(e.svc.Config().SweepAge+time.Second))
			if err != nil || st != (checkout.SweepStats{Stale: 1, Resent: 1}) {
				t.Fatalf("sweep = %+v, %v; want 1 stale attempt, 1 command sent again", st, err)
			}
			testenv.WaitFor(t, 20*time.Second, func() bool {
				o, _ := e.svc.Store().FindOrder(ctx, s.order)
				return o.Paid
			}, "the order paid")
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
			e := newEnv(t, b.url(t), envOptions{noStages: true, timeout: 20 * time.Second})
			s := newShop(t, e, 10, 2)
			stockPart := "stock." + itoa(e.svc.Store().Keys().Partition(s.item))
			// No payment stage: the payment part stays silent.
			e.startStages(t, checkout.StageStock)
			e.leave(t, s.order, 1)
			testenv.WaitFor(t, 20*time.Second, func() bool { return e.sagaField(s.order, 1, "r:"+stockPart) == "ok" }, "the stock taken")
			s.expect(t, e, 8, 10, false)
			st, err := e.svc.Sweep(ctx, time.Now().Add(e.svc.Config().AbandonAge+time.Second))
			if err != nil || st != (checkout.SweepStats{Stale: 1, Resent: 2, Abandoned: 1}) {
				t.Fatalf("sweep = %+v, %v; want the payment abandoned and both parts compensated", st, err)
			}
			testenv.WaitFor(t, 20*time.Second, func() bool { return e.sagaField(s.order, 1, "c:"+stockPart) == "ok" }, "the stock given back")
			s.expect(t, e, 10, 10, false)
			if st := e.sagaField(s.order, 1, "status"); st != checkout.StatusCompensating {
				t.Fatalf("saga %s before the payment stage confirms, want compensating", st)
			}
			// The payment stage comes back: the late payment applies and is
			// undone by its compensation, and the attempt fails.
			e.startStages(t, checkout.StagePayment)
			testenv.WaitFor(t, 20*time.Second, func() bool { return e.sagaField(s.order, 1, "status") == checkout.StatusFailed }, "the attempt failed")
			s.expect(t, e, 10, 10, false)
			if r := e.sagaField(s.order, 1, "reason"); r != "no answer from pay in time" {
				t.Errorf("reason %q", r)
			}
			// A new attempt, with every stage running, pays.
			if out := e.must(t, 200, "POST", "/orders/checkout/"+s.order); num(t, out, "tr_num") != 2 {
				t.Errorf("checkout after the failed attempt = %v, want attempt 2", out)
			}
			s.expect(t, e, 8, 4, true)
		})
	}
}

// A call that dies after beginning its attempt and before sending its
// commands leaves them unsent. Its caller's retry joins the attempt and
// sends them, so the attempt is paid well before any sweep.
func TestCheckout_checkingOutAgainSendsTheCommandsOfACallThatDied(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			e := newEnv(t, b.url(t), envOptions{noStages: true, timeout: 20 * time.Second})
			s := newShop(t, e, 10, 2)
			e.leave(t, s.order, 1)
			topics := e.svc.Topics()
			for _, topic := range []stream.Topic{topics.Stock, topics.Payment} {
				for p := range topic.Partitions {
					if err := e.rdb.Del(ctx, topic.Stream(p)).Err(); err != nil {
						t.Fatal(err)
					}
				}
			}
			e.startStages(t, allStages...)
			if out := e.must(t, 200, "POST", "/orders/checkout/"+s.order); num(t, out, "tr_num") != 1 {
				t.Errorf("checkout again = %v, want attempt 1 paid", out)
			}
			s.expect(t, e, 8, 4, true)
			for _, part := range []string{"stock." + itoa(e.svc.Store().Keys().Partition(s.item)), "pay"} {
				if r := e.sagaField(s.order, 1, "r:"+part); r != "ok" {
					t.Errorf("part %s answered %q, want ok", part, r)
				}
			}
		})
	}
}

// failingSends fails every pipeline of its client while down is set, as
// go-redis does when the server cannot be reached.
type failingSends struct{ down *atomic.Bool }

func (failingSends) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (failingSends) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (f failingSends) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if f.down.Load() {
			err := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
			for _, c := range cmds {
				c.SetErr(err)
			}
			return err
		}
		return next(ctx, cmds)
	}
}

// TestCheckout_sendFailingAfterTheBeginAnswers503AndCheckingOutAgainSendsTheCommands
// covers Redis failing between the two round trips of a checkout: the
// attempt begun, its commands not sent. The call answers 503 (try again),
// the attempt stays open with no command out, and checking out again joins
// it, sends them, and the order is paid once.
func TestCheckout_sendFailingAfterTheBeginAnswers503AndCheckingOutAgainSendsTheCommands(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			url := b.url(t)
			sends, err := stream.Dial(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = sends.Close() })
			var down atomic.Bool
			sends.AddHook(failingSends{&down})
			e := newEnv(t, url, envOptions{noStages: true, timeout: 20 * time.Second, sendVia: sends})
			s := newShop(t, e, 10, 2)
			down.Store(true)
			code, out, err := e.call(t, "POST", "/orders/checkout/"+s.order)
			if err != nil || code != 503 || errorCode(out) != "unavailable" {
				t.Fatalf("checkout with its sends failing = %d %v, %v; want 503 unavailable", code, out, err)
			}
			if st := e.sagaField(s.order, 1, "status"); st != checkout.StatusPending {
				t.Fatalf("attempt 1 status %q, want %q: begun and left open", st, checkout.StatusPending)
			}
			topics := e.svc.Topics()
			for _, topic := range []stream.Topic{topics.Stock, topics.Payment} {
				for p := range topic.Partitions {
					if n := e.rdb.XLen(ctx, topic.Stream(p)).Val(); n != 0 {
						t.Fatalf("%s holds %d commands, want none sent", topic.Stream(p), n)
					}
				}
			}
			down.Store(false)
			e.startStages(t, allStages...)
			if out := e.must(t, 200, "POST", "/orders/checkout/"+s.order); num(t, out, "tr_num") != 1 {
				t.Errorf("checkout again = %v, want attempt 1 paid", out)
			}
			s.expect(t, e, 8, 4, true)
		})
	}
}
