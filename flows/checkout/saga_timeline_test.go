package checkout_test

import (
	"net/http"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/dropstream/dropstream/api/apitest"
	"github.com/dropstream/dropstream/flows/checkout"
	"github.com/dropstream/dropstream/internal/testenv"
)

// timeline reads GET /v1/sagas/{order} through the apitest harness, which
// checks the exchange against /openapi.json.
func (e *env) timeline(t *testing.T, order string) checkout.Timeline {
	t.Helper()
	return sagaTimeline(t, e.apiServer(t), order)
}

// sagaOrders makes a user with credit 10 and an item of price 2 with stock
// 1, then checks out two orders of one item each: the first succeeds, the
// second fails on stock and is compensated.
func sagaOrdersTB(t testing.TB, e *env) (user, item, paid, failed string) {
	t.Helper()
	item = str(t, e.must(t, 200, "POST", "/stock/item/create/2"), "item_id")
	e.must(t, 200, "POST", "/stock/add/"+item+"/1")
	user = str(t, e.must(t, 200, "POST", "/payment/create_user"), "user_id")
	e.must(t, 200, "POST", "/payment/add_funds/"+user+"/10")
	paid = str(t, e.must(t, 200, "POST", "/orders/create/"+user), "order_id")
	failed = str(t, e.must(t, 200, "POST", "/orders/create/"+user), "order_id")
	e.must(t, 200, "POST", "/orders/addItem/"+paid+"/"+item)
	e.must(t, 200, "POST", "/orders/addItem/"+failed+"/"+item)
	e.must(t, 200, "POST", "/orders/checkout/"+paid)
	e.must(t, 400, "POST", "/orders/checkout/"+failed)
	return user, item, paid, failed
}

func TestSaga_timelineShowsEveryStepWithItsTrace(t *testing.T) {
	for _, b := range contractBackends() {
		t.Run(b.name, func(t *testing.T) {
			e := newEnv(t, b.url(t), envOptions{timeout: 20 * time.Second, tracer: sdktrace.NewTracerProvider()})
			user, item, paid, failed := sagaOrdersTB(t, e)
			stockPart := "stock." + itoa(e.svc.Store().Keys().Partition(item))
			tests := []struct {
				order, status, reason string
				results, comps        map[string]string
				compensated           int
			}{
				{paid, checkout.StatusSucceeded, "", map[string]string{stockPart: "ok", "pay": "ok"}, map[string]string{}, 0},
				{failed, checkout.StatusFailed, "insufficient stock for item " + item,
					map[string]string{stockPart: "fail:insufficient stock for item " + item, "pay": "ok"}, map[string]string{"pay": "ok"}, 1},
			}
			for _, tc := range tests {
				tl := e.timeline(t, tc.order)
				if tl.OrderID != tc.order || len(tl.Attempts) != 1 {
					t.Fatalf("timeline of %s = %+v, want one attempt", tc.order, tl)
				}
				a := tl.Attempts[0]
				if a.TrNum != 1 || a.Source != checkout.SourceRedis || a.Status != tc.status || a.Reason != tc.reason ||
					a.UserID != user || a.TotalCost != 2 || len(a.TraceID) != 32 || a.Compensated != tc.compensated || a.Parts != 2 {
					t.Errorf("attempt of %s = %+v, want %s %q by %s with a trace, %d compensated", tc.order, a, tc.status, tc.reason, user, tc.compensated)
				}
				if a.StartedAt == nil || a.FinishedAt == nil || a.FinishedAt.Before(*a.StartedAt) {
					t.Errorf("attempt of %s started %v finished %v", tc.order, a.StartedAt, a.FinishedAt)
				}
				for _, st := range a.Steps {
					if st.Result != tc.results[st.Part] || st.Compensation != tc.comps[st.Part] || st.AnsweredAt == nil ||
						(st.Compensation != "") != (st.CompensatedAt != nil) || st.Request.OrderID != tc.order || st.Request.TrNum != 1 {
						t.Errorf("step %s of %s = %+v, want result %q compensation %q", st.Part, tc.order, st, tc.results[st.Part], tc.comps[st.Part])
					}
				}
			}
			srv := e.apiServer(t)
			get := func(order string) apitest.Response {
				return apitest.Request(t, srv, http.MethodGet, "/v1/sagas/"+order, nil, "Authorization", "Bearer "+readKey)
			}
			apitest.WantEnvelope(t, get("nope"), http.StatusNotFound, "order_not_found")
			apitest.WantEnvelope(t, get("bad%21id"), http.StatusBadRequest, "invalid")
			apitest.WantEnvelope(t, apitest.Get(t, srv, "/v1/sagas/"+paid), http.StatusUnauthorized, "unauthenticated")
		})
	}
}

func TestSaga_timelineListsEveryAttemptNewestFirst(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			e := newEnv(t, b.url(t), envOptions{timeout: 20 * time.Second})
			_, item, _, failed := sagaOrdersTB(t, e)
			e.must(t, 200, "POST", "/stock/add/"+item+"/1")
			e.must(t, 200, "POST", "/orders/checkout/"+failed)
			tl := e.timeline(t, failed)
			if !tl.Paid || len(tl.Attempts) != 2 {
				t.Fatalf("timeline of %s = %+v, want paid with two attempts", failed, tl)
			}
			for i, want := range []struct {
				tr     int64
				status string
			}{{2, checkout.StatusSucceeded}, {1, checkout.StatusFailed}} {
				if a := tl.Attempts[i]; a.TrNum != want.tr || a.Status != want.status || a.Source != checkout.SourceRedis || a.Parts != 2 {
					t.Errorf("attempt %d = %+v, want attempt %d %s from Redis with two parts", i, a, want.tr, want.status)
				}
			}
		})
	}
}

func TestSaga_timelineComesFromClickHouseOnceRedisForgetsTheAttempt(t *testing.T) {
	e := newEnv(t, testenv.RedisURL(t), envOptions{timeout: 20 * time.Second, tracer: sdktrace.NewTracerProvider()})
	ch := e.runHistory(t)
	e.svc.WithHistory(ch)

	_, item, _, failed := sagaOrdersTB(t, e)
	hot := e.timeline(t, failed).Attempts[0]
	testenv.WaitFor(t, 20*time.Second, func() bool {
		var n uint64
		err := ch.Conn().QueryRow(t.Context(), `SELECT count() FROM checkout_sagas WHERE order_id = ?`, failed).Scan(&n)
		return err == nil && n == 1
	})
	// Redis forgets the saga (its state TTL passes).
	if err := e.rdb.Del(t.Context(), e.svc.Store().Keys().Saga(failed, 1)).Err(); err != nil {
		t.Fatal(err)
	}
	tl := e.timeline(t, failed)
	if len(tl.Attempts) != 1 {
		t.Fatalf("timeline = %+v, want one attempt", tl)
	}
	a := tl.Attempts[0]
	if a.Source != checkout.SourceClickHouse || a.Status != checkout.StatusFailed || a.Reason != "insufficient stock for item "+item ||
		a.TraceID != hot.TraceID || a.Compensated != 1 || a.Parts != 2 || a.TotalCost != 2 || len(a.Steps) != 0 ||
		a.StartedAt == nil || !a.StartedAt.Equal(*hot.StartedAt) || a.FinishedAt == nil || !a.FinishedAt.Equal(*hot.FinishedAt) {
		t.Errorf("attempt from ClickHouse = %+v, want the one Redis showed: %+v", a, hot)
	}
}
