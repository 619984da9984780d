package checkout_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/dropstream/dropstream/flows/checkout"
	"github.com/dropstream/dropstream/internal/benchstat"
	"github.com/dropstream/dropstream/internal/tenancy"
	"github.com/dropstream/dropstream/internal/testenv"
)

// BenchmarkSaga_timelineRoute measures GET /v1/sagas/{order_id} over HTTP
// on redis-server, for an order with a paid attempt and one with a failed,
// compensated attempt (two parts each), alternately. It reports p50 and
// p99.
func BenchmarkSaga_timelineRoute(b *testing.B) {
	e := newEnv(b, testenv.RedisURL(b), envOptions{timeout: 20 * time.Second})
	_, _, paid, failed := sagaOrdersTB(b, e)
	orders := []string{paid, failed}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		resp, err := e.http.Get(e.base + "/v1/sagas/" + orders[i%2])
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("GET = %v, %v", resp, err)
		}
		_ = resp.Body.Close()
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	reportLatency(b, lat)
}

// BenchmarkSaga_cancelRoute measures POST /v1/admin/sagas/{order_id}/cancel
// over HTTP on redis-server, each on an attempt stuck on its payment (no
// payment stage runs; its stock taken): the cancel records the payment
// cancelled, gives the stock back and refunds nothing twice. The stuck
// attempt is made outside the timer. It reports p50 and p99.
func BenchmarkSaga_cancelRoute(b *testing.B) {
	ctx := context.Background()
	e := newEnv(b, testenv.RedisURL(b), envOptions{noStages: true, timeout: 20 * time.Second})
	e.startStagesTB(b, checkout.StageStock)
	st := e.svc.Store()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		item, _ := st.CreateItemOf(ctx, tenancy.Open, 3)
		_, _ = st.AddStock(ctx, item, 10)
		user, _ := st.CreateUserOf(ctx, tenancy.Open)
		_, _ = st.AddFunds(ctx, user, 10)
		order, _ := st.CreateOrder(ctx, user)
		if _, err := st.AddItem(ctx, order, item, 2); err != nil {
			b.Fatal(err)
		}
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _, _ = e.svc.Checkout(cctx, order) }()
		part := "r:stock." + itoa(st.Keys().Partition(item))
		testenv.WaitFor(b, 20*time.Second, func() bool {
			return e.rdb.HGet(ctx, st.Keys().Saga(order, 1), part).Val() == "ok"
		}, "the stock taken")
		cancel()
		<-done
		b.StartTimer()
		t0 := time.Now()
		req, _ := http.NewRequest(http.MethodPost, e.base+"/v1/admin/sagas/"+order+"/cancel", nil)
		resp, err := e.http.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("cancel = %v, %v", resp, err)
		}
		_ = resp.Body.Close()
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	reportLatency(b, lat)
}

// BenchmarkSaga_conservationCheck measures one conservation check
// (Flow.Conservation) over 100,000 items and 100,000 users on
// redis-server.
func BenchmarkSaga_conservationCheck(b *testing.B) {
	ctx := context.Background()
	e := newEnv(b, testenv.RedisURL(b), envOptions{noStages: true, timeout: 20 * time.Second})
	st := e.svc.Store()
	if err := errors.Join(st.BatchInitItems(ctx, 100_000, 100, 10), st.BatchInitUsers(ctx, 100_000, 1000)); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if d, err := e.svc.Conservation(ctx); err != nil || d != (checkout.Drift{}) {
			b.Fatalf("conservation = %+v, %v", d, err)
		}
	}
}

// reportLatency reports the p50 and p99 of lat in milliseconds.
func reportLatency(b *testing.B, lat []time.Duration) {
	l := benchstat.Summarize(lat)
	b.ReportMetric(float64(l.P50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(l.P99.Microseconds())/1000, "p99-ms")
}
