package offer

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/dropstream/dropstream/clickhouse/clickhousetest"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/writer/sink"
)

func TestHistory_writesEverySearchToClickHouseOnce(t *testing.T) {
	ctx := context.Background()
	ch := clickhousetest.Open(t)
	clk := newClock()
	rdb := testenv.Backends()[1].Client(t)
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tel := quiet
	tel.TracerProvider = tp
	s, err := NewWith(ctx, rdb, testConfig(clk), tel)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if _, err := s.Catalog().Put(ctx, SampleOffers(1, 100, 20, s.cfg.Handlers)...); err != nil {
		t.Fatal(err)
	}
	cfg := s.HistoryConfig()
	cfg.FlushInterval = 20 * time.Millisecond
	hist, err := sink.NewHistory(ch, cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hist.Close() })
	runStages(t, s.rdb, append(s.Stages(), hist.Stage())...)
	runKeeper(t, s)
	req := SearchRequest{Filter: aggFilter([]string{"p1"}, testAgg)}
	var id string
	for i, want := range []string{OutcomeMiss, OutcomeHit, OutcomeHit} {
		resp, err := s.Search(ctx, req, "")
		if err != nil || resp.Outcome != want {
			t.Fatalf("search %d = %s, %v; want %s", i, resp.Outcome, err, want)
		}
		id = resp.ResultID
		clk.advance(10 * time.Second)
	}
	var counts clickhousetest.OfferRequestCounts
	waitFor(t, func() bool {
		counts, err = clickhousetest.CountOfferRequests(ctx, ch, id)
		return err == nil && counts.Total == 3
	})
	if counts.ByOutcome[OutcomeMiss] != 1 || counts.ByOutcome[OutcomeHit] != 2 {
		t.Errorf("history by outcome %v, want 1 miss and 2 hits", counts.ByOutcome)
	}
	var ages, traces uint64
	if err := ch.Conn().QueryRow(ctx, `SELECT countIf(result_age_ms > 0 OR outcome != 'hit'), countIf(length(trace_id) = 32)
		FROM offer_requests WHERE result_id = ?`, id).Scan(&ages, &traces); err != nil {
		t.Fatal(err)
	}
	if ages != 3 || traces != 3 {
		t.Errorf("%d of 3 rows have a result age (hits) or are not hits; %d of 3 carry a trace id", ages, traces)
	}
}
