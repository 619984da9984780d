package comic

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/internal/tick"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer/sink"
)

// HistoryConfig configures the "comic-history" stage: events to
// comic_events, listings and sales to comic_sessions, with deterministic
// ids so redeliveries collapse.
func (s *Flow) HistoryConfig() sink.HistoryConfig[historyRow] {
	return sink.HistoryConfig[historyRow]{Stage: StageHistory, Topic: s.topics.Events,
		Tables: []string{"comic_events", "comic_sessions"}, Rows: historyRows, Insert: insertHistory,
		Runner: stream.RunnerConfig{BatchSize: 1000}}
}

// History snapshots subscription statistics into comic_pattern_stats.
type History struct {
	ch    *clickhouse.Client
	store *Store
}

// NewHistory returns the statistics snapshotter over ch and store. The
// topics are not used: the events' append is Flow.HistoryConfig.
func NewHistory(ch *clickhouse.Client, _ Topics, store *Store) *History {
	return &History{ch: ch, store: store}
}

const (
	insertEvents = `INSERT INTO comic_events (event_id, kind, comic_id, gen, at, at_ms, email, subscription_id, txn_id,
		price_cents, publisher, series, title, issue, year, grade, key_issue, trace_id)`
	insertSessions = `INSERT INTO comic_sessions (session_id, comic_id, gen, opened_at, opened_at_ms, closed_at, closed_at_ms,
		closed, publisher, series, title, issue, year, grade, key_issue, price_cents, buyer, txn_id, trace_id)`
	insertStats = `INSERT INTO comic_pattern_stats (at, kind, name, subscriptions, distinct_values, top_value, top_count, diversity)`
)

// historyRow is an event's comic_events row and, for a listing or sale,
// its comic_sessions row, in column order.
type historyRow struct {
	event, session []any
}

// splitMs returns ms as a DateTime second and its milliseconds.
func splitMs(ms int64) (time.Time, uint16) {
	if ms <= 0 {
		return time.Unix(0, 0).UTC(), 0
	}
	return time.Unix(ms/1000, 0).UTC(), uint16(ms % 1000)
}

// historyRows decodes an event into its rows.
func historyRows(m *stream.Message) ([]historyRow, error) {
	var e Event
	if err := json.Unmarshal(m.Payload, &e); err != nil || e.ComicID == "" {
		return nil, stream.Permanentf("comic: decode event: %v", err)
	}
	var c Comic
	_ = json.Unmarshal(e.Comic, &c)
	who := e.Email
	if e.Kind == EventSold {
		who = e.TxnID
	}
	at, atMs := splitMs(e.AtMs)
	id := e.Kind + ":" + e.ComicID + ":" + strconv.FormatInt(e.Gen, 10) + ":" + who
	if e.Kind == EventForgotten {
		id += ":" + strconv.FormatInt(e.AtMs, 10)
	}
	r := historyRow{event: []any{id, e.Kind, e.ComicID, uint32(e.Gen), at, atMs, e.Email, e.SubscriptionID, e.TxnID,
		e.PriceCents, c.Publisher, c.Series, c.Title, c.Issue, uint16(c.Year), float32(c.Grade), c.KeyIssue, e.TraceID}}
	sid := e.ComicID + ":" + strconv.FormatInt(e.Gen, 10)
	switch e.Kind {
	case EventListed:
		zero, zeroMs := splitMs(0)
		r.session = []any{sid, e.ComicID, uint32(e.Gen), at, atMs, zero, zeroMs, uint8(0), c.Publisher, c.Series, c.Title,
			c.Issue, uint16(c.Year), float32(c.Grade), c.KeyIssue, c.PriceCents, "", "", e.TraceID}
	case EventSold:
		open, openMs := splitMs(e.ListedAtMs)
		r.session = []any{sid, e.ComicID, uint32(e.Gen), open, openMs, at, atMs, uint8(1), c.Publisher, c.Series, c.Title,
			c.Issue, uint16(c.Year), float32(c.Grade), c.KeyIssue, e.PriceCents, e.Email, e.TxnID, e.TraceID}
	}
	return []historyRow{r}, nil
}

// insertHistory appends rows in one insert per table (none into
// comic_sessions without a session row).
func insertHistory(ctx context.Context, ch *clickhouse.Client, rows []historyRow) error {
	var events, sessions [][]any
	for _, r := range rows {
		events = append(events, r.event)
		if r.session != nil {
			sessions = append(sessions, r.session)
		}
	}
	if err := clickhouse.InsertRows(ctx, ch, "comic_events", insertEvents, events); err != nil {
		return err
	}
	return clickhouse.InsertRows(ctx, ch, "comic_sessions", insertSessions, sessions)
}

// SnapshotStats writes a "pattern" row per pattern and a "field" row per
// field to comic_pattern_stats, stamped with now to the minute.
func (h *History) SnapshotStats(ctx context.Context, now time.Time) error {
	st, err := h.store.Stats(ctx)
	if err != nil {
		return err
	}
	at := now.UTC().Truncate(time.Minute)
	var rows [][]any
	for _, p := range st.Patterns {
		rows = append(rows, []any{at, "pattern", p.Pattern, p.Subscriptions, int64(p.BloatedValueSets), "", int64(p.ExtraShards), 0.0})
	}
	for _, f := range st.Fields {
		rows = append(rows, []any{at, "field", f.Field, f.Subscriptions, f.Distinct, f.TopValue, f.TopCount, f.Diversity})
	}
	return clickhouse.InsertRows(ctx, h.ch, "comic_pattern_stats", insertStats, rows)
}

// RunSnapshots snapshots the statistics every interval until ctx ends;
// failures are retried at the next tick.
func (h *History) RunSnapshots(ctx context.Context, interval time.Duration, onErr func(error)) error {
	tick.Every(ctx, interval, func() {
		if err := h.SnapshotStats(ctx, time.Now()); err != nil && ctx.Err() == nil && onErr != nil {
			onErr(err)
		}
	})
	return nil
}
