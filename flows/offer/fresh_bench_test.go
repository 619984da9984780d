package offer

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// BenchmarkFresh_delay measures, per offer change, the time from the
// change's commit (Put returning) to the first search that reflects it —
// what a user waits for a fresh result — over 600 offers with the handler
// stages and the keeper running, one cached search per change. It reports
// p50 and p99.
func BenchmarkFresh_delay(b *testing.B) {
	rdb := testenv.Backends()[1].Client(b)
	cfg := freshConfig(time.Second)
	s, err := NewWith(context.Background(), rdb, cfg, quiet)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	offers := SampleOffers(5, 600, 20, s.cfg.Handlers)
	if _, err := s.Catalog().Put(ctx, offers...); err != nil {
		b.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, st := range s.Stages() {
		r, err := stream.NewRunner(rdb, st, quiet)
		if err != nil {
			b.Fatal(err)
		}
		go func() { _ = r.Run(runCtx) }()
	}
	go func() { _ = s.RunFresh(runCtx) }()
	req := productSearch("p1")
	var delays []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.Search(ctx, req, ""); err != nil { // cached
			b.Fatal(err)
		}
		o := offers[0]
		o.ID, o.ProductID = "bench-"+strconv.Itoa(i), "p1"
		if _, err := s.Catalog().Put(ctx, o); err != nil {
			b.Fatal(err)
		}
		changed := time.Now()
		for {
			r, err := s.Search(ctx, req, "")
			if err != nil {
				b.Fatal(err)
			}
			if slices.ContainsFunc(r.Matches, func(m Match) bool { return m.OfferID == o.ID }) {
				delays = append(delays, time.Since(changed))
				break
			}
		}
	}
	b.StopTimer()
	slices.Sort(delays)
	b.ReportMetric(float64(delays[len(delays)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(delays[len(delays)*99/100].Microseconds())/1000, "p99-ms")
}
