package history

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/clickhouse/clickhousetest"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer/sink"
)

// Records go to Redis (recent, by id) and, through notify.history (one
// message per Record call) and the "notifier-history" stage, into
// ClickHouse, once per notification even when a record is published twice;
// the stage also reads a single-record message of earlier releases, and
// dead-letters a message that holds no record.
func TestRecorder_redisAndClickHouse(t *testing.T) {
	ctx := context.Background()
	rdb, err := stream.Dial(ctx, "redis://"+miniredis.RunT(t).Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	ch := testenv.ClickHouse(t)
	pub := stream.NewPublisher(rdb, stream.Telemetry{})
	rec, err := NewRecorder(rdb, pub, Config{Partitions: 2, Recent: 3})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	r := func(id, status string, d time.Duration) Record {
		return Record{ID: id, Flow: "comic", Event: "comic.match", SubscriberID: "s_1", Channel: "email", Subject: "comic:" + id,
			Window: "w", Status: status, Attempts: 1, ObservedAt: at, At: at.Add(d), LatencyMs: d.Milliseconds(), TraceID: "t"}
	}
	all := []Record{r("n1", StatusFailed, time.Second), r("n1", StatusSent, 2*time.Second), r("n2", StatusHeld, time.Second),
		r("n3", StatusSent, time.Second), r("n3", StatusSent, time.Second), r("n4", StatusSuppressed, time.Second)}
	if err := rec.Record(ctx, all...); err != nil {
		t.Fatal(err)
	}
	if n, err := rdb.XLen(ctx, Topic(2).Stream(Topic(2).Partition("n1"))).Result(); err != nil || n != 1 {
		t.Fatalf("%d messages for one Record call, %v: want 1", n, err)
	}
	legacy, err := json.Marshal(r("n5", StatusRejected, 3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish(ctx, Topic(2), stream.NewMessage("n5", TypeRecord, legacy), stream.NewMessage("n6", TypeRecords, []byte("[]"))); err != nil {
		t.Fatal(err)
	}
	recent, err := rec.Recent(ctx, "s_1", 10)
	if err != nil || len(recent) != 3 || recent[0].ID != "n4" {
		t.Fatalf("recent %+v, %v: want the newest 3", recent, err)
	}
	if got, err := rec.Get(ctx, "n1"); err != nil || got.Status != StatusSent {
		t.Fatalf("get n1 = %+v, %v", got, err)
	}
	cfg := AppendConfig(2, stream.RunnerConfig{Block: 50 * time.Millisecond, StatsInterval: time.Minute})
	cfg.FlushInterval = 50 * time.Millisecond
	hist, err := sink.NewHistory(ch, cfg, stream.Telemetry{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hist.Close() })
	runner, err := stream.NewRunner(rdb, hist.Stage(), stream.Telemetry{})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = runner.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	var rows []clickhouse.NotificationRow
	testenv.WaitFor(t, 20*time.Second, func() bool {
		rows, err = clickhousetest.SubscriberNotifications(ctx, ch, "s_1", 10)
		return err == nil && len(rows) == 5 && rows[0].NotificationID == "n5"
	}, "five notifications in ClickHouse, n5 last recorded")
	want := map[string]string{"n1": StatusSent, "n2": StatusHeld, "n3": StatusSent, "n4": StatusSuppressed, "n5": StatusRejected}
	for _, row := range rows {
		if want[row.NotificationID] != row.Status {
			t.Errorf("%s: status %s, want %s", row.NotificationID, row.Status, want[row.NotificationID])
		}
		if row.NotificationID == "n1" && (row.Channel != "email" || row.Subject != "comic:n1" || row.Attempts != 1 ||
			row.LatencyMs != 2000 || row.TraceID != "t" || !row.ObservedAt.Equal(at)) {
			t.Errorf("n1: %+v, want its record's channel, subject, attempts, latency, trace and observation", row)
		}
	}
	dlq := stream.NewDeadLetters(rdb)
	testenv.WaitFor(t, 20*time.Second, func() bool { n, err := dlq.Count(ctx, Topic(2)); return err == nil && n == 1 },
		"the empty batch dead-lettered")
}
