package comic

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dropstream/dropstream/clickhouse/clickhousetest"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer/sink"
)

// TestHistory_inventorySalesAndNotificationsInClickHouse runs the flow with
// the history stage on real Redis and ClickHouse: a comic listed, notified,
// sold, relisted; then the events, sessions and statistics are queried.
func TestHistory_inventorySalesAndNotificationsInClickHouse(t *testing.T) {
	ctx := context.Background()
	ch := clickhousetest.Open(t)
	rdb := backends()[1].Client(t)
	rcv := newReceiver(t)
	svc := newService(t, rdb, rcv, newTestPayments(), StoreConfig{})
	mustSubscribe(t, svc.Subscriptions, "a@example.com", `{"publisher":"Marvel"}`)
	mustSubscribe(t, svc.Subscriptions, "b@example.com", `{"publisher":"Marvel","key_issue":true}`)
	cfg := svc.HistoryConfig()
	cfg.FlushInterval = 20 * time.Millisecond
	cfg.Runner.Consumer, cfg.Runner.Block = StageHistory+"-main", 50*time.Millisecond
	appender, err := sink.NewHistory(ch, cfg, stream.Telemetry{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = appender.Close() })
	run(t, rdb, append(svc.Stages(), appender.Stage())...)
	c := comicN("Hulk", 181, "Marvel", true)
	if _, _, err := svc.Inventory.Add(ctx, c); err != nil {
		t.Fatal(err)
	}
	waitDone(t, svc, c.ID())
	if _, err := svc.Sales.Purchase(ctx, "a@example.com", c.ID(), "card", "txn-1", rcv.tokens(c.ID())["a@example.com"]); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.Inventory.Add(ctx, c); err != nil {
		t.Fatal(err)
	}
	count := func(q string) uint64 {
		var n uint64
		if err := ch.Conn().QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	// listed ×2, notified ×2, sold ×1.
	testenv.WaitFor(t, waitTimeout, func() bool {
		return count("SELECT count() FROM comic_events FINAL") == 5 && count("SELECT count() FROM comic_sessions FINAL") == 2
	}, "5 events and 2 sessions in ClickHouse")
	byKind := map[string]uint64{}
	rows, err := ch.Conn().Query(ctx, "SELECT kind, count() FROM comic_events FINAL GROUP BY kind")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		var n uint64
		if err := rows.Scan(&k, &n); err != nil {
			t.Fatal(err)
		}
		byKind[k] = n
	}
	_ = rows.Close()
	if fmt.Sprint(byKind) != "map[listed:2 notified:2 sold:1]" {
		t.Errorf("events by kind %v", byKind)
	}
	// Two sessions: the first closed by the sale, the second open.
	if n := count("SELECT count() FROM comic_sessions FINAL WHERE closed = 1 AND gen = 1 AND buyer = 'a@example.com' AND price_cents = " +
		fmt.Sprint(c.PriceCents)); n != 1 {
		t.Errorf("%d closed sessions of gen 1 sold to a, want 1", n)
	}
	if n := count("SELECT count() FROM comic_sessions FINAL WHERE closed = 0 AND gen = 2"); n != 1 {
		t.Errorf("%d open sessions of gen 2, want 1", n)
	}
	if err := SnapshotStats(ctx, ch, svc.Subscriptions, time.Now()); err != nil {
		t.Fatal(err)
	}
	if n := count("SELECT count() FROM comic_pattern_stats FINAL WHERE kind = 'pattern'"); n != 2 {
		t.Errorf("%d pattern rows, want 2", n)
	}
	var div float64
	if err := ch.Conn().QueryRow(ctx, "SELECT diversity FROM comic_pattern_stats FINAL WHERE kind = 'field' AND name = 'publisher'").Scan(&div); err != nil || div != 1 {
		t.Errorf("publisher diversity %v, %v; want 1 (everyone wants Marvel)", div, err)
	}
}
