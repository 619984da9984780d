package notifier

import (
	"context"
	"testing"
	"time"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/clickhouse/clickhousetest"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/notifier/history"
	"github.com/dropstream/dropstream/notifier/subscriber"
	"github.com/dropstream/dropstream/notifier/throttle"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer/sink"
)

// A delivery's history reaches ClickHouse through notify.history and the
// "notifier-history" stage: one row per notification, its last record
// winning, with the subscriber, destination, channel, subject, status,
// attempts (a 503 first, then sent), latency from the observation and the
// producer's trace id; the Redis history holds the same record.
func TestDeliver_historyReachesClickHouse(t *testing.T) {
	ctx := context.Background()
	ch := testenv.ClickHouse(t)
	rdb := dial(t, testenv.RedisURL(t))
	w := newWorldWith(t, rdb, throttle.Config{Disabled: true}, history.Config{Partitions: 2})
	sub := w.subscribe(t, "/a", "", subscriber.Preferences{})
	w.run(t)
	cfg := history.AppendConfig(2, stream.RunnerConfig{Block: 50 * time.Millisecond, StatsInterval: time.Minute})
	cfg.FlushInterval = 50 * time.Millisecond
	hist, err := sink.NewHistory(ch, cfg, w.tel)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hist.Close() })
	runner, err := stream.NewRunner(rdb, hist.Stage(), w.tel)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = runner.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })

	w.hook.answer("", 503)
	r := req(sub, "comic:1", "w1")
	r.ObservedAt = time.Now().Add(-3 * time.Second).Truncate(time.Millisecond)
	pctx, span := w.tel.TracerProvider.Tracer("test").Start(ctx, "produce")
	if err := PublishRequests(pctx, w.pub, w.topic, r); err != nil {
		t.Fatal(err)
	}
	span.End()
	traceID := span.SpanContext().TraceID().String()

	var rows []clickhouse.NotificationRow
	testenv.WaitFor(t, waitTimeout, func() bool {
		rows, err = clickhousetest.SubscriberNotifications(ctx, ch, sub, 10)
		return err == nil && len(rows) == 1 && rows[0].Status == history.StatusSent
	}, "the sent notification in ClickHouse (have %+v, %v)", rows, err)
	got := w.hook.messages()
	if len(got) != 1 {
		t.Fatalf("received %d, want 1", len(got))
	}
	row := rows[0]
	if row.NotificationID != got[0].ID || row.SubscriberID != sub || row.DestinationID != got[0].DestinationID || row.Channel != ChannelWebhook ||
		row.Subject != "comic:1" || row.Window != "w1" || row.Attempts != 2 || row.TraceID != traceID || row.Flow != "comic" {
		t.Fatalf("row %+v: want notification %s to %s on webhook about comic:1, sent after 2 attempts, trace %s", row, got[0].ID, sub, traceID)
	}
	if !row.ObservedAt.Equal(r.ObservedAt) || row.LatencyMs < 3000 || row.LatencyMs > uint64(3000+waitTimeout.Milliseconds()) {
		t.Fatalf("row observed at %s with latency %d ms: want %s and the time from it to the send", row.ObservedAt, row.LatencyMs, r.ObservedAt)
	}
	rec, err := w.hist.Get(ctx, row.NotificationID)
	if err != nil || rec.Status != row.Status || rec.LatencyMs != int64(row.LatencyMs) || rec.TraceID != traceID {
		t.Fatalf("Redis record %+v, %v: want the row's", rec, err)
	}
}
