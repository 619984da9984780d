package checkout_test

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/dropstream/dropstream/clickhouse/clickhousetest"
	"github.com/dropstream/dropstream/internal/testenv"
)

// sagaRow is a row of checkout_sagas.
type sagaRow struct {
	order, user, status, reason, traceID string
	tr, decideMs, durationMs             uint32
	total                                int64
	parts, compensated                   uint16
}

func TestAnalytics_finishedAttemptsReachClickHouse(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	e := newEnv(t, testenv.RedisURL(t), envOptions{timeout: 20 * time.Second, tracer: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))})
	ch := e.runHistory(t)

	item := str(t, e.must(t, 200, "POST", "/stock/item/create/2"), "item_id")
	e.must(t, 200, "POST", "/stock/add/"+item+"/1")
	user := str(t, e.must(t, 200, "POST", "/payment/create_user"), "user_id")
	e.must(t, 200, "POST", "/payment/add_funds/"+user+"/10")
	var orders []string
	for range 2 {
		o := str(t, e.must(t, 200, "POST", "/orders/create/"+user), "order_id")
		e.must(t, 200, "POST", "/orders/addItem/"+o+"/"+item)
		orders = append(orders, o)
	}
	e.must(t, 200, "POST", "/orders/checkout/"+orders[0])
	e.must(t, 400, "POST", "/orders/checkout/"+orders[1]) // no stock left: payment compensated
	var s clickhousetest.CheckoutStats
	var err error
	testenv.WaitFor(t, 20*time.Second, func() bool {
		s, err = clickhousetest.CheckoutSagaStats(context.Background(), ch)
		return err == nil && s.Attempts == 2
	}, "two attempts in ClickHouse")
	if s.Succeeded != 1 || s.Failed != 1 || s.Compensated != 1 || s.Reasons["insufficient stock for item "+item] != 1 {
		t.Errorf("stats = %+v", s)
	}

	// Each row carries its attempt's figures and the trace of its checkout
	// call.
	traces := map[string]bool{}
	for _, sp := range rec.Ended() {
		if sp.Name() == "POST /orders/checkout/:order_id" {
			traces[sp.SpanContext().TraceID().String()] = true
		}
	}
	rows, err := ch.Conn().Query(t.Context(), `SELECT order_id, tr_num, user_id, status, reason, total_cost, parts, compensated,
	decide_ms, duration_ms, trace_id FROM checkout_sagas FINAL`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]sagaRow{}
	for rows.Next() {
		var r sagaRow
		if err := rows.Scan(&r.order, &r.tr, &r.user, &r.status, &r.reason, &r.total, &r.parts, &r.compensated,
			&r.decideMs, &r.durationMs, &r.traceID); err != nil {
			t.Fatal(err)
		}
		got[r.order] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := map[string]sagaRow{
		orders[0]: {order: orders[0], tr: 1, user: user, status: "succeeded", total: 2, parts: 2},
		orders[1]: {order: orders[1], tr: 1, user: user, status: "failed", reason: "insufficient stock for item " + item, total: 2, parts: 2, compensated: 1},
	}
	seen := map[string]bool{}
	for id, w := range want {
		g := got[id]
		if !traces[g.traceID] || seen[g.traceID] {
			t.Errorf("order %s: trace id %q is not that of its own checkout call (%v)", id, g.traceID, traces)
		}
		seen[g.traceID] = true
		if g.durationMs < g.decideMs || g.durationMs > 20_000 {
			t.Errorf("order %s: decided in %d ms, finished in %d ms", id, g.decideMs, g.durationMs)
		}
		w.traceID, w.decideMs, w.durationMs = g.traceID, g.decideMs, g.durationMs
		if g != w {
			t.Errorf("row of order %s = %+v, want %+v", id, g, w)
		}
	}
}
