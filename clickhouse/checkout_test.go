package clickhouse_test

import (
	"testing"
	"time"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/clickhouse/clickhousetest"
)

func TestCheckoutSagas_redeliveredRowsCollapseAndStatsAreExact(t *testing.T) {
	c := migrated(t)
	at := time.Date(2026, 3, 1, 12, 0, 0, 250_000_000, time.UTC)
	row := func(order string, tr uint32, status, reason string, comp uint16, dur time.Duration) clickhouse.CheckoutSagaRow {
		return clickhouse.CheckoutSagaRow{OrderID: order, TrNum: tr, UserID: "u", Status: status, Reason: reason, TotalCost: 5,
			Parts: 3, Compensated: comp, StartedAt: at, FinishedAt: at.Add(dur), Decide: dur / 2, Duration: dur,
			TraceID: "0af7651916cd43dd8448eb211c80319c"}
	}
	rows := []clickhouse.CheckoutSagaRow{
		row("a", 1, "failed", "insufficient credit for user u", 2, 10*time.Millisecond),
		row("a", 2, "succeeded", "", 0, 20*time.Millisecond),
		row("b", 1, "failed", "insufficient stock for item 7", 0, 30*time.Millisecond),
		row("c", 1, "failed", "insufficient stock for item 7", 1, 40*time.Millisecond),
	}
	for range 2 { // the second insert is a redelivery
		if err := clickhouse.InsertCheckoutSagas(t.Context(), c, rows); err != nil {
			t.Fatal(err)
		}
	}
	s, err := clickhousetest.CheckoutSagaStats(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	if s.Attempts != 4 || s.Succeeded != 1 || s.Failed != 3 || s.Orders != 3 || s.Compensated != 2 {
		t.Errorf("stats = %+v, want 4 attempts (1 succeeded, 3 failed, 2 compensated) of 3 orders", s)
	}
	if s.Reasons["insufficient stock for item 7"] != 2 || s.Reasons["insufficient credit for user u"] != 1 || len(s.Reasons) != 2 {
		t.Errorf("reasons = %v", s.Reasons)
	}
	if s.DurationP99 != 40*time.Millisecond {
		t.Errorf("p99 duration %s, want 40ms", s.DurationP99)
	}
}
