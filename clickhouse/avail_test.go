package clickhouse_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/clickhouse/clickhousetest"
)

// migrated opens a fresh database with the schema applied.
func migrated(t testing.TB) *clickhouse.Client {
	t.Helper()
	c := open(t)
	if _, err := clickhouse.Migrate(t.Context(), c, nil); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return c
}

var day0 = time.Date(2024, 1, 31, 23, 59, 58, 250_000_000, time.UTC)

func transitionRow(i int, at time.Time) clickhouse.TransitionRow {
	return clickhouse.TransitionRow{
		EventID: fmt.Sprintf("ev-%d", i), RunID: fmt.Sprintf("run-%d", i), RunAt: at, Kind: "open",
		EntityKey: fmt.Sprintf("resy|v%d|2024-02-01|19:00|2", i%7), EntityKind: "slot", Provider: "resy",
		Venue: fmt.Sprintf("v%d", i%7), Date: "2024-02-01", SlotTime: "19:00", PartySize: 2,
		ScopeKey: "s", SourceID: "src", LastSeen: at, TraceID: "0af7651916cd43dd8448eb211c80319c",
	}
}

func partitions(t *testing.T, c *clickhouse.Client, table string) []string {
	t.Helper()
	rows, err := c.Conn().Query(t.Context(), `SELECT DISTINCT partition FROM system.parts
	WHERE database = currentDatabase() AND table = ? AND active ORDER BY partition`, table)
	if err != nil {
		t.Fatalf("system.parts: %v", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			t.Fatalf("scan: %v", err)
		}
		out = append(out, p)
	}
	return out
}

func TestInsertTransitions_duplicatesCountOnce(t *testing.T) {
	c := migrated(t)
	ctx := t.Context()
	var rows []clickhouse.TransitionRow
	for i := range 100 {
		rows = append(rows, transitionRow(i, day0.Add(time.Duration(i)*time.Second)))
	}
	// The same rows again, in two more inserts: redelivered batches.
	for _, batch := range [][]clickhouse.TransitionRow{rows, rows[:50], rows[50:]} {
		if err := clickhouse.InsertTransitions(ctx, c, batch); err != nil {
			t.Fatalf("InsertTransitions: %v", err)
		}
	}
	if err := clickhouse.InsertTransitions(ctx, c, nil); err != nil {
		t.Fatalf("InsertTransitions(nil): %v", err)
	}
	tests := []struct {
		name string
		f    clickhouse.Filter
		want uint64
	}{
		{"all", clickhouse.Filter{}, 100},
		{"provider", clickhouse.Filter{Provider: "resy"}, 100},
		{"other provider", clickhouse.Filter{Provider: "opentable"}, 0},
		{"january", clickhouse.Filter{To: time.Date(2024, 2, 1, 0, 0, 0, 0, time.UTC)}, 2},
		{"february", clickhouse.Filter{From: time.Date(2024, 2, 1, 0, 0, 0, 0, time.UTC)}, 98},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := clickhouse.CountTransitions(ctx, c, tt.f)
			if err != nil {
				t.Fatalf("CountTransitions: %v", err)
			}
			if n != tt.want {
				t.Fatalf("CountTransitions(%+v) = %d, want %d", tt.f, n, tt.want)
			}
		})
	}
	if got := partitions(t, c, clickhouse.TableTransitions); !slices.Equal(got, []string{"202401", "202402"}) {
		t.Fatalf("transitions partitions = %v, want monthly 202401, 202402", got)
	}
}

// TestInsertTransitions_largeBatchesRoundTrip inserts rows given in several
// slices, enough for the column buffers to be reserved up front, with
// strings of varied lengths (some empty), and reads every value back.
func TestInsertTransitions_largeBatchesRoundTrip(t *testing.T) {
	c := migrated(t)
	ctx := t.Context()
	const n = 3000
	var rows []clickhouse.TransitionRow
	for i := range n {
		r := transitionRow(i, day0.Add(time.Duration(i)*time.Millisecond))
		r.VenueName = strings.Repeat("é", i%5) // "" for every fifth row
		r.Stable, r.Notify = i%2 == 0, i%3 == 0
		rows = append(rows, r)
	}
	if err := clickhouse.InsertTransitions(ctx, c, rows[:1], rows[1:1200], nil, rows[1200:]); err != nil {
		t.Fatalf("InsertTransitions: %v", err)
	}
	q, err := c.Conn().Query(ctx, `SELECT event_id, run_id, venue_name, entity_key, venue, stable, notify, run_at, run_at_ms
	FROM transitions ORDER BY run_at, run_at_ms`)
	if err != nil {
		t.Fatalf("select: %v", err)
	}
	defer q.Close()
	i := 0
	for ; q.Next(); i++ {
		var ev, run, name, key, venue string
		var stable, notify uint8
		var at time.Time
		var ms uint16
		if err := q.Scan(&ev, &run, &name, &key, &venue, &stable, &notify, &at, &ms); err != nil {
			t.Fatalf("scan: %v", err)
		}
		w := rows[i]
		got := clickhouse.TransitionRow{EventID: ev, RunID: run, VenueName: name, EntityKey: key, Venue: venue,
			Stable: stable == 1, Notify: notify == 1, RunAt: at.Add(time.Duration(ms) * time.Millisecond)}
		if got.EventID != w.EventID || got.RunID != w.RunID || got.VenueName != w.VenueName || got.EntityKey != w.EntityKey ||
			got.Venue != w.Venue || got.Stable != w.Stable || got.Notify != w.Notify || !got.RunAt.Equal(w.RunAt) {
			t.Fatalf("row %d = %+v, want %+v", i, got, w)
		}
	}
	if i != n {
		t.Fatalf("read %d rows, want %d", i, n)
	}
}

func TestInsertRuns_appliedRowWinsAndPartitionsAreDaily(t *testing.T) {
	c := migrated(t)
	ctx := t.Context()
	run := func(id string, at time.Time, applied bool) clickhouse.RunRow {
		return clickhouse.RunRow{RunID: id, SourceID: "src", Provider: "resy", ScopeKey: "s",
			StartedAt: at.Add(-time.Second), RunAt: at, Status: "ok", Observed: 3, Applied: applied, TraceID: "t"}
	}
	rows := []clickhouse.RunRow{run("r1", day0, true), run("r2", day0.Add(3*time.Second), true)}
	if err := clickhouse.InsertRuns(ctx, c, rows); err != nil {
		t.Fatalf("InsertRuns: %v", err)
	}
	// A replay of r1 records applied=false; it must not replace the applied row.
	if err := clickhouse.InsertRuns(ctx, c, []clickhouse.RunRow{run("r1", day0, false)}); err != nil {
		t.Fatalf("InsertRuns replay: %v", err)
	}
	if n, err := clickhouse.CountRuns(ctx, c, clickhouse.Filter{}); err != nil || n != 2 {
		t.Fatalf("CountRuns = %d, %v; want 2", n, err)
	}
	var applied uint8
	q := "SELECT applied FROM " + clickhouse.TableRuns + " FINAL WHERE run_id = 'r1'"
	if err := c.Conn().QueryRow(ctx, q).Scan(&applied); err != nil || applied != 1 {
		t.Fatalf("r1 applied = %d, %v; want 1 (the applied row wins)", applied, err)
	}
	if got := partitions(t, c, clickhouse.TableRuns); !slices.Equal(got, []string{"20240131", "20240201"}) {
		t.Fatalf("runs partitions = %v, want daily 20240131, 20240201", got)
	}
}

func TestInsertSessions_earliestClosedVersionWins(t *testing.T) {
	c := migrated(t)
	ctx := t.Context()
	open := clickhouse.SessionRow{SessionID: "s1", EntityKey: "resy|v|2024-02-01|19:00|2", EntityKind: "slot",
		Provider: "resy", Venue: "v", Date: "2024-02-01", SlotTime: "19:00", PartySize: 2,
		OpenRunID: "r1", OpenedAt: day0, TraceID: "t1"}
	closed := open
	closed.Closed, closed.CloseRunID, closed.ClosedAt, closed.Duration, closed.TraceID =
		true, "r2", day0.Add(90*time.Second+500*time.Millisecond), 90*time.Second+500*time.Millisecond, "t2"
	// A writer that paired the open with a later close: the earlier close
	// must win, whatever the insert order.
	paired := closed
	paired.CloseRunID, paired.ClosedAt, paired.Duration = "r9", day0.Add(time.Hour), time.Hour
	other := open
	other.SessionID, other.OpenRunID = "s2", "r3"
	// The closed row may arrive first; version decides, not order.
	for _, batch := range [][]clickhouse.SessionRow{{closed}, {open, other}, {paired}, {open}} {
		if err := clickhouse.InsertSessions(ctx, c, batch); err != nil {
			t.Fatalf("InsertSessions: %v", err)
		}
	}
	n, err := clickhousetest.CountSessions(ctx, c)
	if err != nil {
		t.Fatalf("CountSessions: %v", err)
	}
	if n != (clickhousetest.SessionCounts{Total: 2, Open: 1, Closed: 1}) {
		t.Fatalf("CountSessions = %+v, want 2 total, 1 open, 1 closed", n)
	}
	got, err := clickhousetest.EntitySessions(ctx, c, open.EntityKey, 10)
	if err != nil {
		t.Fatalf("EntitySessions: %v", err)
	}
	if len(got) != 2 {
		t.Fatalf("EntitySessions = %+v, want 2 sessions", got)
	}
	s1 := got[slices.IndexFunc(got, func(r clickhouse.SessionRow) bool { return r.SessionID == "s1" })]
	if !s1.Closed || s1.Duration != closed.Duration || !s1.ClosedAt.Equal(closed.ClosedAt) ||
		!s1.OpenedAt.Equal(day0) || s1.TraceID != "t2" || s1.CloseRunID != "r2" {
		t.Fatalf("s1 = %+v, want the closed version with ms precision", s1)
	}
}

func TestInsert_failsOnUnreachableServer(t *testing.T) {
	c := migrated(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := clickhouse.InsertTransitions(ctx, c, []clickhouse.TransitionRow{transitionRow(1, day0)}); err == nil {
		t.Fatal("InsertTransitions with a cancelled context succeeded")
	}
}

// BenchmarkInsertTransitions measures rows/s of InsertTransitions in
// batches of 10 rows (what a handful of blocked handlers fill), 10,000 and
// 40,000 rows (a flush of the analytics stage under a backlog: 8 partitions
// × 5,000 messages).
func BenchmarkInsertTransitions(b *testing.B) {
	c := migrated(b)
	for _, size := range []int{10, 10_000, 40_000} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			rows := make([]clickhouse.TransitionRow, size)
			for i := range rows {
				rows[i] = transitionRow(i, day0.Add(time.Duration(i)*time.Millisecond))
			}
			n := 0
			for b.Loop() {
				if err := clickhouse.InsertTransitions(b.Context(), c, rows); err != nil {
					b.Fatalf("InsertTransitions: %v", err)
				}
				n++
			}
			b.ReportMetric(float64(n*size)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
