package checkout_test

import (
	"net/http"
	"slices"
	"testing"
	"time"

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
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
