package writer_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/clickhouse/clickhousetest"
	"github.com/dropstream/dropstream/internal/telemetrytest"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer"
	"github.com/dropstream/dropstream/writer/sink"
)

// TestAnalytics_sessionsFromRawTransitions checks the session rows each raw
// transition writes on its own, whatever the order the batches come in: an
// open its session's open row, a close the closed row of the session the
// diff says it ends (which wins over the open row, before and after it),
// and a close without an opening none, counted as unmatched.
func TestAnalytics_sessionsFromRawTransitions(t *testing.T) {
	e := slot("sessions")
	open1, open5 := scoped(e, "open", 1, false), scoped(e, "open", 5, false)
	close3 := closing(scoped(e, "close", 3, false), 1)
	close3.Raw = true
	orphan := scoped(e, "close", 7, false) // its opening is unknown
	orphan.Raw = true
	tests := []struct {
		name      string
		batches   [][]avail.Transition
		want      []clickhouse.SessionRow // latest version per session, by opened_at
		unmatched int64
	}{
		{name: "open only", batches: [][]avail.Transition{{open1}},
			want: []clickhouse.SessionRow{{OpenRunID: open1.RunID, OpenedAt: runAt(1)}}},
		{name: "open then close", batches: [][]avail.Transition{{open1}, {close3}},
			want: []clickhouse.SessionRow{{OpenRunID: open1.RunID, OpenedAt: runAt(1), Closed: true,
				CloseRunID: close3.RunID, ClosedAt: runAt(3), Duration: 2 * time.Minute}}},
		{name: "close before its open, then the next open", batches: [][]avail.Transition{{close3}, {open5, open1}},
			want: []clickhouse.SessionRow{
				{OpenRunID: open1.RunID, OpenedAt: runAt(1), Closed: true, CloseRunID: close3.RunID, ClosedAt: runAt(3), Duration: 2 * time.Minute},
				{OpenRunID: open5.RunID, OpenedAt: runAt(5)}}},
		{name: "replayed", batches: [][]avail.Transition{{open1, close3}, {open1, close3}},
			want: []clickhouse.SessionRow{{OpenRunID: open1.RunID, OpenedAt: runAt(1), Closed: true,
				CloseRunID: close3.RunID, ClosedAt: runAt(3), Duration: 2 * time.Minute}}},
		{name: "close without an opening", batches: [][]avail.Transition{{orphan}}, unmatched: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ch := migrated(t)
			mp, collect := telemetrytest.Metrics(t)
			a := newAnalytics(t, ch, writer.AnalyticsConfig{Partitions: 1, Batching: sink.Batching{FlushInterval: 10 * time.Millisecond}}, mp)
			for _, b := range tc.batches {
				if err := a.HandleTransitions(t.Context(), delivered(1, b...)); err != nil {
					t.Fatalf("HandleTransitions: %v", err)
				}
			}
			got, err := clickhousetest.EntitySessions(t.Context(), ch, e.Key, 10)
			if err != nil {
				t.Fatalf("EntitySessions: %v", err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d sessions %+v, want %d", len(got), got, len(tc.want))
			}
			for i, w := range tc.want {
				g := got[i]
				if g.SessionID != avail.SessionID(e.Key, w.OpenRunID) || g.OpenRunID != w.OpenRunID ||
					!g.OpenedAt.Equal(w.OpenedAt) || g.Closed != w.Closed || g.CloseRunID != w.CloseRunID ||
					!g.ClosedAt.Equal(w.ClosedAt) || g.Duration != w.Duration || g.VenueName != e.VenueName {
					t.Errorf("session %d:\n got %+v\nwant %+v (venue name %q)", i, g, w, e.VenueName)
				}
			}
			var unmatched int64
			if m, ok := telemetrytest.Find(collect(), writer.MetricUnmatchedCloses); ok {
				for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
					unmatched += dp.Value
				}
			}
			if unmatched != tc.unmatched {
				t.Errorf("%d unmatched closes counted, want %d", unmatched, tc.unmatched)
			}
		})
	}
}

// TestAnalytics_runTransitionsWriteTheirRun checks that a message of a run
// with its transitions (avail.TypeTransitions, as the diff writes them)
// writes the transitions, with the run's fields, and the run's row, once
// however many of the run's messages and redeliveries carry it.
func TestAnalytics_runTransitionsWriteTheirRun(t *testing.T) {
	ch := migrated(t)
	a := newAnalytics(t, ch, writer.AnalyticsConfig{Partitions: 1, Batching: sink.Batching{FlushInterval: 10 * time.Millisecond}}, nil)
	e1, e2 := slot("rt-1"), slot("rt-2")
	run := avail.RunRecord{RunID: "rt-run-1", SourceID: "src", Provider: "resy", ScopeKey: scopeKey("rt"),
		StartedAt: runAt(1).Add(-time.Second), RunAt: runAt(1), Status: avail.StatusOK, Observed: 2, Opened: 2,
		Applied: true, TraceID: fmt.Sprintf("%032x", 7)}
	var msgs []*stream.Message
	for i, e := range []avail.Entity{e1, e2} { // one message each, as a long run's are split
		tr := avail.Transition{EventID: avail.EventID(run.RunID, e.Key, avail.KindOpen, false), Entity: e,
			Kind: avail.KindOpen, Raw: true}
		body, err := json.Marshal(avail.RunTransitions{Run: run, Transitions: []avail.Transition{tr}})
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, &stream.Message{ID: fmt.Sprintf("%d-0", i+1), Key: run.ScopeKey, Type: avail.TypeTransitions,
			Payload: body, Attempt: 1})
	}
	for range 2 { // delivered again
		if err := a.HandleTransitions(t.Context(), msgs); err != nil {
			t.Fatalf("HandleTransitions: %v", err)
		}
	}
	got, ok := counts(t, ch)
	if !ok || got.transitions != 2 || got.runs != 1 || got.sessions != (clickhousetest.SessionCounts{Total: 2, Open: 2}) {
		t.Fatalf("ClickHouse holds %+v (ok %v), want 2 transitions, 1 run and 2 open sessions", got, ok)
	}
	sessions, err := clickhousetest.EntitySessions(t.Context(), ch, e1.Key, 10)
	if err != nil || len(sessions) != 1 || sessions[0].OpenRunID != run.RunID || sessions[0].ScopeKey != run.ScopeKey ||
		sessions[0].TraceID != run.TraceID || !sessions[0].OpenedAt.Equal(run.RunAt) {
		t.Fatalf("sessions of %s = %+v, %v; want one opened by %s in scope %s, trace %s", e1.Key, sessions, err, run.RunID, run.ScopeKey, run.TraceID)
	}
}
