package notifier

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/dropstream/dropstream/internal/benchstat"
	"github.com/dropstream/dropstream/internal/egress/egresstest"
)

// BenchmarkWebhookChannel_send measures one signed webhook POST to a local
// receiver answering 204, client and receiver in this process: CPU and
// allocations per send (the receiver's included), CPU from getrusage
// (cpu-µs/op), which load blurs less than the time per send.
func BenchmarkWebhookChannel_send(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	w, err := NewWebhookChannel(WebhookConfig{Egress: egresstest.Allow(b, srv.URL)})
	if err != nil {
		b.Fatal(err)
	}
	n := testNotification(srv.URL + "/hook")
	ctx := context.Background()
	b.ReportAllocs()
	cpu0 := benchstat.ProcessCPU()
	for b.Loop() {
		if err := w.Send(ctx, n); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((benchstat.ProcessCPU()-cpu0).Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
}
