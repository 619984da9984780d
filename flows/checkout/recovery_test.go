package checkout_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/dropstream/dropstream/flows/checkout"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// allStages are the saga's stages.
var allStages = []string{checkout.StageStock, checkout.StagePayment}

// startStages runs the named stages of e's service until the test ends.
func (e *env) startStages(t *testing.T, names ...string) { e.startStagesTB(t, names...) }

// startStagesTB is startStages for a test or a benchmark.
func (e *env) startStagesTB(t testing.TB, names ...string) {
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

// leave starts attempt tr of an order with the service's checkout call and
// cancels the call once the attempt has begun, like a caller that went
// away: the call returns ErrPending and the attempt is not given up.
func (e *env) leave(t *testing.T, order string, tr int64) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := e.svc.Checkout(ctx, order)
		errc <- err
	}()
	saga := e.svc.Store().Keys().Saga(order, tr)
	testenv.WaitFor(t, 20*time.Second, func() bool { return e.rdb.Exists(context.Background(), saga).Val() == 1 }, "attempt %d begun", tr)
	cancel()
	if err := <-errc; !errors.Is(err, checkout.ErrPending) {
		t.Fatalf("checkout cancelled during attempt %d = %v, want ErrPending", tr, err)
	}
}

// errorCode is the code of a JSON error answer.
func errorCode(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// errorMessage is the message of a JSON error answer.
func errorMessage(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	c, _ := e["message"].(string)
	return c
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

// sagaField reads a field of attempt tr's saga hash.
func (e *env) sagaField(order string, tr int64, field string) string {
	return e.rdb.HGet(context.Background(), e.svc.Store().Keys().Saga(order, tr), field).Val()
}

// answer is an HTTP answer received on a channel.
type answer struct {
	code int
	out  map[string]any
	err  error
}

func TestCheckout_expiredWaitGivesTheAttemptUpAndAnswers400Compensated(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration // the flow's
		running []string      // stages running during the wait
		// during runs while the call waits, before its deadline.
		during func(t *testing.T, e *env, s shop)
		// stockAnswered: the stock part answers in time, only the payment
		// part is given up.
		stockAnswered bool
		late          []string // stages started after the answer
		// lateResult is what the stages answer to the attempt's forward
		// commands once the late stages run, lateCount how many answers.
		lateResult string
		lateCount  int
	}{
		{name: "no stage runs", timeout: time.Second, late: allStages, lateResult: "cancelled", lateCount: 2},
		{name: "payment stage down", timeout: time.Second, running: []string{checkout.StageStock},
			during: func(t *testing.T, e *env, s shop) {
				part := "r:stock." + itoa(e.svc.Store().Keys().Partition(s.item))
				testenv.WaitFor(t, 20*time.Second, func() bool { return e.sagaField(s.order, 1, part) != "" }, "the stock part's answer")
				if r := e.sagaField(s.order, 1, part); r != "ok" {
					t.Fatalf("stock part %q before the deadline, want ok", r)
				}
			},
			stockAnswered: true, late: []string{checkout.StagePayment}, lateResult: "cancelled", lateCount: 1},
	}
	for _, b := range contractBackends() {
		for _, tc := range tests {
			t.Run(b.name+"/"+tc.name, func(t *testing.T) {
				rec := tracetest.NewSpanRecorder()
				tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
				e := newEnv(t, b.url(t), envOptions{noStages: true, timeout: tc.timeout, tracer: tp})
				s := newShop(t, e, 10, 2)
				silent := []string{"stock." + itoa(e.svc.Store().Keys().Partition(s.item)), "pay"}
				if tc.stockAnswered {
					silent = silent[1:]
				}
				e.startStages(t, tc.running...)
				answers := make(chan answer, 1)
				go func() {
					code, out, err := e.call(t, "POST", "/orders/checkout/"+s.order)
					answers <- answer{code, out, err}
				}()
				if tc.during != nil {
					tc.during(t, e, s)
				}
				a := <-answers
				if want := "checkout failed: no answer from " + silent[0] + " in time"; a.err != nil || a.code != 400 ||
					errorCode(a.out) != "checkout_failed" || errorMessage(a.out) != want {
					t.Fatalf("checkout whose wait expired = %d %v, %v; want 400 checkout_failed %q", a.code, a.out, a.err, want)
				}
				// Every compensation was applied before the answer, with the
				// missing stages still down.
				s.expect(t, e, 10, 10, false)
				if st := e.sagaField(s.order, 1, "status"); st != checkout.StatusFailed {
					t.Errorf("attempt 1 %q, want failed", st)
				}
				for _, part := range silent {
					if r := e.sagaField(s.order, 1, "r:"+part); r != "abandoned" {
						t.Errorf("silent part %s recorded %q, want abandoned", part, r)
					}
				}
				giveUps := 0
				for _, sp := range rec.Ended() {
					if sp.Name() == "checkout.give_up" {
						giveUps++
						if sp.Parent().SpanID() != serverSpan(t, rec).SpanContext().SpanID() {
							t.Errorf("checkout.give_up span is not a child of the checkout's server span")
						}
					}
				}
				if giveUps != 1 {
					t.Errorf("%d checkout.give_up spans, want 1", giveUps)
				}
				// The late stages answer the attempt's forward commands from
				// their ledger entries and change nothing.
				e.startStages(t, tc.late...)
				testenv.WaitFor(t, 20*time.Second, func() bool { return forwardAnswers(rec, s.order, 1, tc.lateResult) == tc.lateCount },
					"%d late answers %q", tc.lateCount, tc.lateResult)
				s.expect(t, e, 10, 10, false)
				// Nothing was charged: the order can be checked out again.
				e.startStages(t, missing(tc.running, tc.late)...)
				if out := e.must(t, 200, "POST", "/orders/checkout/"+s.order); num(t, out, "tr_num") != 2 {
					t.Errorf("checkout again = %v, want attempt 2", out)
				}
				s.expect(t, e, 8, 4, true)
			})
		}
	}
}

// forwardAnswers counts the stages' spans of the forward commands of attempt tr
// of an order whose result was result.
func forwardAnswers(rec *tracetest.SpanRecorder, order string, tr int64, result string) int {
	n := 0
	for _, sp := range rec.Ended() {
		if sp.Name() != "checkout.stock" && sp.Name() != "checkout.payment" {
			continue
		}
		got := map[attribute.Key]attribute.Value{}
		for _, kv := range sp.Attributes() {
			got[kv.Key] = kv.Value
		}
		cmd := got["checkout.command"].AsString()
		if got["checkout.order_id"].AsString() == order && got["checkout.tr_num"].AsInt64() == tr &&
			(cmd == checkout.CmdSubtract || cmd == checkout.CmdPay) && got["checkout.result"].AsString() == result {
			n++
		}
	}
	return n
}

// missing returns the stages of allStages in none of the lists.
func missing(lists ...[]string) []string {
	var out []string
	for _, name := range allStages {
		found := false
		for _, l := range lists {
			found = found || slices.Contains(l, name)
		}
		if !found {
			out = append(out, name)
		}
	}
	return out
}

// serverSpan returns the first ended server span of a checkout call.
func serverSpan(t *testing.T, rec *tracetest.SpanRecorder) sdktrace.ReadOnlySpan {
	t.Helper()
	for _, s := range rec.Ended() {
		if s.Name() == "POST /orders/checkout/:order_id" {
			return s
		}
	}
	t.Fatal("no server span of a checkout")
	return nil
}

func TestCheckout_callerGoneTheSagaStillCompletesOrCompensates(t *testing.T) {
	tests := []struct {
		name          string
		credit        int
		stock, remain int64
		paid          bool
		status        string
		again         int // answer of a checkout after the saga finished
	}{
		{"paid", 10, 8, 4, true, checkout.StatusSucceeded, 200},
		{"credit short, compensated", 5, 10, 5, false, checkout.StatusFailed, 400},
	}
	for _, b := range backends() {
		for _, tc := range tests {
			t.Run(b.name+"/"+tc.name, func(t *testing.T) {
				e := newEnv(t, b.url(t), envOptions{noStages: true, timeout: 20 * time.Second, clientTimeout: 200 * time.Millisecond})
				s := newShop(t, e, tc.credit, 2)
				if code, out, err := e.call(t, "POST", "/orders/checkout/"+s.order); err == nil {
					t.Fatalf("checkout with no stage running answered %d %v before the client's timeout", code, out)
				}
				// The caller has gone; the stages come and the saga finishes
				// without it.
				e.startStages(t, allStages...)
				testenv.WaitFor(t, 20*time.Second, func() bool { return e.sagaField(s.order, 1, "status") == tc.status },
					"attempt 1 %s", tc.status)
				s.expect(t, e, tc.stock, tc.remain, tc.paid)
				e.must(t, tc.again, "POST", "/orders/checkout/"+s.order)
				s.expect(t, e, tc.stock, tc.remain, tc.paid)
			})
		}
	}
}

func TestCheckout_redisDownAtTheDeadlineAnswers503AndTheSagaStillCompletes(t *testing.T) {
	srv := testenv.StartRedis(t, testenv.RedisConfig{AppendOnly: true, AppendFsync: "always"})
	e := newEnv(t, srv.URL(), envOptions{noStages: true, timeout: 2 * time.Second, retryFor: time.Second})
	s := newShop(t, e, 10, 2)
	answers := make(chan answer, 1)
	go func() {
		code, out, err := e.call(t, "POST", "/orders/checkout/"+s.order)
		answers <- answer{code, out, err}
	}()
	saga := e.svc.Store().Keys().Saga(s.order, 1)
	testenv.WaitFor(t, 20*time.Second, func() bool { return e.rdb.Exists(context.Background(), saga).Val() == 1 }, "attempt 1 begun")
	// Redis goes down once the commands are out, as the begin script and
	// the send are two round trips: killed between them, the call answers
	// with the send's error (503) instead.
	stock, pay := e.svc.Topics().Stock, e.svc.Topics().Payment
	testenv.WaitFor(t, 20*time.Second, func() bool {
		ctx := context.Background()
		return e.rdb.XLen(ctx, stock.Stream(stock.Partition(s.item))).Val() == 1 && e.rdb.XLen(ctx, pay.Stream(pay.Partition(s.user))).Val() == 1
	}, "the commands of attempt 1 sent")
	srv.Kill()
	a := <-answers
	// Giving the attempt up needs Redis: the call tries for RetryFor, then
	// answers that Redis is unavailable.
	if a.err != nil || a.code != 503 || errorCode(a.out) != "unavailable" {
		t.Fatalf("checkout with Redis down at its deadline = %d %v, %v; want 503 unavailable", a.code, a.out, a.err)
	}
	srv.Restart(t)
	e.startStages(t, allStages...)
	// Checking out again joins attempt 1, which the stages finish.
	if out := e.must(t, 200, "POST", "/orders/checkout/"+s.order); num(t, out, "tr_num") != 1 {
		t.Errorf("checkout after the restart = %v, want attempt 1", out)
	}
	s.expect(t, e, 8, 4, true)
}
