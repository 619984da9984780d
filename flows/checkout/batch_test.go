package checkout_test

import (
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/dropstream/dropstream/flows/checkout"
	"github.com/dropstream/dropstream/stream"
)

// TestBatchInit_largestAllowedKeepsHealthzAnswering runs the largest
// batch_init the contract allows on the embedded Redis and checks that it
// succeeds, that /healthz answered while it ran (seen between the batch's
// first and last user being written), and that one more is refused.
func TestBatchInit_largestAllowedKeepsHealthzAnswering(t *testing.T) {
	emb, err := stream.StartEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Close)
	e := newEnv(t, emb.URL(), envOptions{noStages: true})
	ctx := t.Context()
	first, last := e.svc.Store().Keys().User("0"), e.svc.Store().Keys().User(strconv.Itoa(checkout.MaxBatch-1))

	done := make(chan int, 1)
	go func() {
		status, _, err := e.call(t, "POST", "/payment/batch_init/"+strconv.Itoa(checkout.MaxBatch)+"/7")
		if err != nil {
			t.Errorf("batch_init: %v", err)
		}
		done <- status
	}()
	during, status := 0, 0
	for status == 0 {
		started := e.rdb.Exists(ctx, first).Val() == 1
		resp, err := e.http.Get(e.base + "/healthz")
		if err != nil {
			t.Fatalf("healthz: %v", err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("healthz answered %d", resp.StatusCode)
		}
		if started && e.rdb.Exists(ctx, last).Val() == 0 {
			during++
		}
		select {
		case status = <-done:
		default:
		}
	}
	if status != http.StatusOK {
		t.Fatalf("batch_init of %d answered %d, want 200", checkout.MaxBatch, status)
	}
	if during == 0 {
		t.Fatal("/healthz never answered while the batch ran")
	}
	if credit, err := e.rdb.HGet(ctx, last, "credit").Int(); err != nil || credit != 7 {
		t.Fatalf("last user's credit %d (%v), want 7", credit, err)
	}
	t.Logf("/healthz answered %d times during the batch", during)

	status, body, err := e.call(t, "POST", "/payment/batch_init/"+strconv.Itoa(checkout.MaxBatch+1)+"/7")
	if err != nil || status != http.StatusBadRequest {
		t.Fatalf("batch_init of %d answered %d %v (%v), want 400", checkout.MaxBatch+1, status, body, err)
	}
}

// BenchmarkBatchInit_healthzDuringLargest measures /healthz while the
// largest orders batch_init (three commands an order) runs on the embedded
// Redis: the p99 and the slowest answer (healthz-p99-ms, healthz-max-ms)
// and the batch's duration (batch-s).
func BenchmarkBatchInit_healthzDuringLargest(b *testing.B) {
	emb, err := stream.StartEmbedded()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(emb.Close)
	e := newEnv(b, emb.URL(), envOptions{noStages: true})
	n := strconv.Itoa(checkout.MaxBatch)
	var lat []time.Duration
	var batch time.Duration
	for b.Loop() {
		done := make(chan int, 1)
		start := time.Now()
		go func() {
			status, _, err := e.call(b, "POST", "/orders/batch_init/"+n+"/"+n+"/"+n+"/3")
			if err != nil {
				b.Errorf("batch_init: %v", err)
			}
			done <- status
		}()
		status := 0
		for status == 0 {
			t0 := time.Now()
			resp, err := e.http.Get(e.base + "/healthz")
			if err != nil {
				b.Fatalf("healthz: %v", err)
			}
			_ = resp.Body.Close()
			lat = append(lat, time.Since(t0))
			select {
			case status = <-done:
			default:
			}
		}
		batch += time.Since(start)
		if status != http.StatusOK {
			b.Fatalf("batch_init answered %d", status)
		}
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "healthz-p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "healthz-max-ms")
	b.ReportMetric(batch.Seconds()/float64(b.N), "batch-s")
}
