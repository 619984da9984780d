package clickhouse_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/clickhouse/clickhousetest"
)

func TestInsertOfferRequests_duplicatesCountOnceByOutcome(t *testing.T) {
	c := migrated(t)
	ctx := t.Context()
	outcomes := []string{"miss", "hit", "hit", "join", "seen"}
	var rows []clickhouse.OfferRequestRow
	for i := range 50 {
		rows = append(rows, clickhouse.OfferRequestRow{RequestID: fmt.Sprintf("call-%d", i), ResultID: fmt.Sprintf("r%d", i%2),
			At: day0.Add(time.Duration(i) * time.Second), Outcome: outcomes[i%len(outcomes)], Status: "complete",
			Wait: 3 * time.Millisecond, Matches: 7, ResultAge: time.Second, Filter: `{"type":"group"}`, TraceID: "0af7651916cd43dd8448eb211c80319c"})
	}
	// Redelivered batches insert the same rows again.
	for _, batch := range [][]clickhouse.OfferRequestRow{rows, rows[:20], nil} {
		if err := clickhouse.InsertOfferRequests(ctx, c, batch); err != nil {
			t.Fatalf("InsertOfferRequests: %v", err)
		}
	}
	all, err := clickhousetest.CountOfferRequests(ctx, c, "")
	if err != nil || all.Total != 50 || all.ByOutcome["hit"] != 20 || all.ByOutcome["miss"] != 10 || all.ByOutcome["seen"] != 10 {
		t.Fatalf("CountOfferRequests = %+v, %v; want 50 (20 hits, 10 misses, 10 seen)", all, err)
	}
	one, err := clickhousetest.CountOfferRequests(ctx, c, "r1")
	if err != nil || one.Total != 25 {
		t.Errorf("CountOfferRequests(r1) = %+v, %v; want 25", one, err)
	}
}
