package checkout_test

import (
	"context"
	"errors"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/api/apitest"
	"github.com/dropstream/dropstream/flows/checkout"
	"github.com/dropstream/dropstream/flows/checkout/httpapi"
	"github.com/dropstream/dropstream/internal/testenv"
)

// Keys of the in-memory API server: a read key and an admin key.
const (
	readKey  = "reader-key"
	adminKey = "admin-key"
)

// apiServer serves e's flow in memory through the apitest harness, which
// checks every exchange against the server's /openapi.json.
func (e *env) apiServer(t *testing.T) *api.Server {
	t.Helper()
	// The orders are made on the open contract: the read key is of its
	// tenant, so it sees them.
	srv, _ := apitest.NewServer(t, api.Config{Logger: quiet(), APIKeys: readKey + ":read:tenant=" + api.OpenTenant + ";" + adminKey + ":admin",
		RateLimit: api.RateLimitConfig{Disabled: true}})
	httpapi.Register(srv, e.svc)
	return srv
}

// cancelSaga is POST /v1/admin/sagas/{order}/cancel with key.
func cancelSaga(t *testing.T, srv *api.Server, key, order string) apitest.Response {
	t.Helper()
	return apitest.Request(t, srv, http.MethodPost, "/v1/admin/sagas/"+order+"/cancel", nil, "Authorization", "Bearer "+key)
}

// sagaTimeline is GET /v1/sagas/{order}.
func sagaTimeline(t *testing.T, srv *api.Server, order string) checkout.Timeline {
	t.Helper()
	r := apitest.Request(t, srv, http.MethodGet, "/v1/sagas/"+order, nil, "Authorization", "Bearer "+readKey)
	if r.Status != http.StatusOK {
		t.Fatalf("GET /v1/sagas/%s = %d %s", order, r.Status, r.Body)
	}
	var tl checkout.Timeline
	r.JSON(t, &tl)
	return tl
}

func TestSaga_cancelStuckAttemptReturnsStockAndCreditExactlyOnce(t *testing.T) {
	for _, b := range contractBackends() {
		t.Run(b.name, func(t *testing.T) {
			e := newEnv(t, b.url(t), envOptions{noStages: true, timeout: 20 * time.Second})
			srv := e.apiServer(t)
			before := e.drift(t)
			s := newShop(t, e, 10, 2)
			stockPart := "stock." + itoa(e.svc.Store().Keys().Partition(s.item))
			// No payment stage: the attempt is stuck on its payment.
			e.startStages(t, checkout.StageStock)
			e.leave(t, s.order, 1)
			testenv.WaitFor(t, 20*time.Second, func() bool { return e.sagaField(s.order, 1, "r:"+stockPart) == "ok" }, "the stock taken")
			s.expect(t, e, 8, 10, false)

			apitest.WantEnvelope(t, cancelSaga(t, srv, readKey, s.order), http.StatusForbidden, "forbidden")
			// Two operators cancel at once.
			outs := make([]checkout.Cancellation, 2)
			var wg sync.WaitGroup
			for i := range outs {
				wg.Go(func() {
					r := cancelSaga(t, srv, adminKey, s.order)
					if r.Status != http.StatusOK {
						t.Errorf("cancel = %d %s, want 200", r.Status, r.Body)
						return
					}
					r.JSON(t, &outs[i])
				})
			}
			wg.Wait()
			for _, c := range outs {
				if c.OrderID != s.order || c.TrNum != 1 || c.Status != checkout.StatusFailed || c.Reason != "cancelled by an operator" ||
					c.RequestedAt.IsZero() || c.RequestedBy == "" || c != outs[0] {
					t.Errorf("cancel answered %+v, want attempt 1 failed, cancelled, the same for both calls (%+v)", c, outs[0])
				}
			}
			s.expect(t, e, 10, 10, false)
			// Again, later: the same answer, nothing given back twice.
			var again checkout.Cancellation
			if r := cancelSaga(t, srv, adminKey, s.order); r.Status != http.StatusOK {
				t.Fatalf("repeated cancel = %d %s", r.Status, r.Body)
			} else if r.JSON(t, &again); again != outs[0] {
				t.Errorf("repeated cancel = %+v, want %+v", again, outs[0])
			}
			s.expect(t, e, 10, 10, false)

			tl := sagaTimeline(t, srv, s.order)
			a := tl.Attempts[0]
			if a.Status != checkout.StatusFailed || a.Reason != "cancelled by an operator" || a.CancelRequestedAt == nil ||
				!a.CancelRequestedAt.Equal(outs[0].RequestedAt) || a.CancelRequestedBy != outs[0].RequestedBy || a.Compensated != 1 {
				t.Errorf("timeline attempt = %+v, want the cancel shown", a)
			}
			want := map[string][2]string{stockPart: {"ok", "ok"}, "pay": {checkout.ResultCancelled, "noop"}}
			for _, st := range a.Steps {
				if w := want[st.Part]; st.Result != w[0] || st.Compensation != w[1] || st.CompensatedAt == nil {
					t.Errorf("step %s = result %q compensation %q, want %q %q", st.Part, st.Result, st.Compensation, w[0], w[1])
				}
			}

			// The payment stage comes back: the stuck payment command never
			// applies. A new attempt (its payment is behind the old one in
			// the user's partition) pays once.
			e.startStages(t, checkout.StagePayment)
			if out := e.must(t, 200, "POST", "/orders/checkout/"+s.order); num(t, out, "tr_num") != 2 {
				t.Errorf("checkout after the cancel = %v, want attempt 2", out)
			}
			s.expect(t, e, 8, 4, true)
			apitest.WantEnvelope(t, cancelSaga(t, srv, adminKey, s.order), http.StatusConflict, "not_running")
			s.expect(t, e, 8, 4, true)
			if d := e.drift(t); d != before {
				t.Errorf("conservation drift after cancels = %+v, want %+v as before", d, before)
			}

			apitest.WantEnvelope(t, cancelSaga(t, srv, adminKey, "nope"), http.StatusNotFound, "order_not_found")
			fresh := str(t, e.must(t, 200, "POST", "/orders/create/"+s.user), "order_id")
			apitest.WantEnvelope(t, cancelSaga(t, srv, adminKey, fresh), http.StatusNotFound, "order_not_found")
			apitest.WantEnvelope(t, cancelSaga(t, srv, adminKey, "bad%21id"), http.StatusBadRequest, "invalid")
		})
	}
}

func TestSaga_cancelRacingTheStagesEndsPaidOrUndoneNeverBoth(t *testing.T) {
	for _, b := range contractBackends() {
		t.Run(b.name, func(t *testing.T) {
			e := newEnv(t, b.url(t), envOptions{timeout: 20 * time.Second})
			srv := e.apiServer(t)
			before := e.drift(t)
			const orders = 12
			shops := make([]shop, orders)
			for i := range shops {
				shops[i] = newShop(t, e, 10, 2)
			}
			codes := make([][2]int, orders)
			checkouts := make([]error, orders)
			var wg sync.WaitGroup
			for i, s := range shops {
				wg.Go(func() {
					saga := e.svc.Store().Keys().Saga(s.order, 1)
					done := make(chan struct{})
					go func() {
						defer close(done)
						_, checkouts[i] = e.svc.Checkout(context.Background(), s.order)
					}()
					defer func() { <-done }()
					deadline := time.Now().Add(20 * time.Second)
					for e.rdb.Exists(context.Background(), saga).Val() == 0 && time.Now().Before(deadline) {
						runtime.Gosched()
					}
					var inner sync.WaitGroup
					for j := range 2 {
						inner.Go(func() { codes[i][j] = cancelSaga(t, srv, adminKey, s.order).Status })
					}
					inner.Wait()
				})
			}
			wg.Wait()
			for i, s := range shops {
				for _, code := range codes[i] {
					if code != http.StatusOK && code != http.StatusConflict {
						t.Fatalf("cancel of order %d = %d, want 200 or 409", i, code)
					}
				}
				if codes[i][0] != codes[i][1] {
					t.Errorf("order %d: cancels answered %v, want the same", i, codes[i])
				}
				o, err := e.svc.Store().FindOrder(context.Background(), s.order)
				if err != nil {
					t.Fatal(err)
				}
				if o.Paid {
					s.expect(t, e, 8, 4, true)
				} else {
					s.expect(t, e, 10, 10, false)
				}
				if o.Paid != (codes[i][0] == http.StatusConflict) || o.Paid != (checkouts[i] == nil) {
					t.Errorf("order %d paid %v but cancels answered %v, the checkout %v", i, o.Paid, codes[i], checkouts[i])
				}
				if !o.Paid && !errors.Is(checkouts[i], checkout.ErrCheckoutFailed) {
					t.Errorf("order %d: checkout of a cancelled attempt = %v, want ErrCheckoutFailed", i, checkouts[i])
				}
			}
			if d := e.drift(t); d != before {
				t.Errorf("conservation drift = %+v, want %+v as before", d, before)
			}
		})
	}
}
