package clickhouse_test

import (
	"testing"
	"time"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/clickhouse/clickhousetest"
)

func TestNotifications_latestStatePerNotificationAndCause(t *testing.T) {
	c := migrated(t)
	ctx := t.Context()
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	row := func(id, status string, d time.Duration, attempts uint16) clickhouse.NotificationRow {
		return clickhouse.NotificationRow{NotificationID: id, Flow: "avail", Event: "availability.open", SubscriberID: "w_1",
			Channel: "webhook", Subject: "resy|v|2026-12-01|19:00|2", Window: "ev-1", Status: status, Attempts: attempts,
			ObservedAt: at, RecordedAt: at.Add(d), LatencyMs: uint64(d.Milliseconds()), TraceID: "0af7651916cd43dd8448eb211c80319c",
			EventID: "ev-1", RunID: "run-1"}
	}
	rows := []clickhouse.NotificationRow{
		row("n_1", "failed", time.Second, 1), row("n_1", "failed", 2*time.Second, 2), row("n_1", "sent", 3*time.Second, 3),
		row("n_2", "held", time.Second, 1),
	}
	// Inserted twice (a redelivered history batch): nothing doubles.
	for range 2 {
		if err := clickhouse.InsertNotifications(ctx, c, rows); err != nil {
			t.Fatal(err)
		}
	}
	got, err := clickhousetest.SubscriberNotifications(ctx, c, "w_1", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].NotificationID != "n_1" || got[0].Status != "sent" || got[0].Attempts != 3 || got[0].LatencyMs != 3000 ||
		!got[0].ObservedAt.Equal(at) || got[1].Status != "held" {
		t.Fatalf("notifications %+v, want n_1 sent after 3 attempts, then n_2 held", got)
	}
	tr := transitionRow(1, at)
	if err := clickhouse.InsertTransitions(ctx, c, []clickhouse.TransitionRow{tr}); err != nil {
		t.Fatal(err)
	}
	if err := clickhouse.InsertRuns(ctx, c, []clickhouse.RunRow{{RunID: "run-1", SourceID: "src", Provider: "resy", ScopeKey: "s",
		StartedAt: at, RunAt: at, Status: "ok", Applied: true, TraceID: "1af7651916cd43dd8448eb211c80319c"}}); err != nil {
		t.Fatal(err)
	}
	cause, err := clickhouse.NotificationCause(ctx, c, "ev-1", "")
	if err != nil {
		t.Fatal(err)
	}
	if cause.Transition == nil || cause.Transition.RunID != "run-1" || cause.Run == nil || cause.Run.TraceID != "1af7651916cd43dd8448eb211c80319c" {
		t.Fatalf("cause %+v", cause)
	}
	if none, err := clickhouse.NotificationCause(ctx, c, "missing", ""); err != nil || none.Transition != nil || none.Run != nil {
		t.Fatalf("cause of a missing transition: %+v, %v", none, err)
	}
}
