package comic

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/stream"
)

// History writes the events topic to ClickHouse (tables of
// clickhouse/schema/0006_comics.sql): every event to comic_events, and each
// comic's time in inventory as a session in comic_sessions. It also
// snapshots the subscription statistics into comic_pattern_stats.
type History struct {
	ch     *clickhouse.Client
	topics Topics
	store  *Store
}

// NewHistory returns the history writer.
func NewHistory(ch *clickhouse.Client, topics Topics, store *Store) *History {
	return &History{ch: ch, topics: topics, store: store}
}

// Stage returns the "comic-history" stage: one insert per table per batch.
func (h *History) Stage() stream.Stage {
	return stream.Stage{Name: StageHistory, Topic: h.topics.Events, BatchHandler: h.handle,
		Config: stream.RunnerConfig{BatchSize: 1000}}
}

const (
	insertEvents = `INSERT INTO comic_events (event_id, kind, comic_id, gen, at, at_ms, email, subscription_id, txn_id,
		price_cents, publisher, series, title, issue, year, grade, key_issue, trace_id)`
	insertSessions = `INSERT INTO comic_sessions (session_id, comic_id, gen, opened_at, opened_at_ms, closed_at, closed_at_ms,
		closed, publisher, series, title, issue, year, grade, key_issue, price_cents, buyer, txn_id, trace_id)`
	insertStats = `INSERT INTO comic_pattern_stats (at, kind, name, subscriptions, distinct_values, top_value, top_count, diversity)`
)

// splitMs returns ms as a DateTime second and its milliseconds.
func splitMs(ms int64) (time.Time, uint16) {
	if ms <= 0 {
		return time.Unix(0, 0).UTC(), 0
	}
	return time.Unix(ms/1000, 0).UTC(), uint16(ms % 1000)
}

func (h *History) handle(ctx context.Context, msgs []*stream.Message) error {
	evBatch, err := h.ch.Conn().PrepareBatch(ctx, insertEvents)
	if err != nil {
		return fmt.Errorf("comic: history: %w", err)
	}
	sessBatch, err := h.ch.Conn().PrepareBatch(ctx, insertSessions)
	if err != nil {
		_ = evBatch.Abort()
		return fmt.Errorf("comic: history: %w", err)
	}
	errs := make([]error, len(msgs))
	sessions := 0
	for i, m := range msgs {
		var e Event
		if err := json.Unmarshal(m.Payload, &e); err != nil || e.ComicID == "" {
			errs[i] = stream.Permanentf("comic: decode event: %v", err)
			continue
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
		if err := evBatch.Append(id, e.Kind, e.ComicID, uint32(e.Gen), at, atMs, e.Email, e.SubscriptionID, e.TxnID,
			e.PriceCents, c.Publisher, c.Series, c.Title, c.Issue, uint16(c.Year), float32(c.Grade), flag(c.KeyIssue), e.TraceID); err != nil {
			errs[i] = stream.Permanentf("comic: event row: %v", err)
			continue
		}
		sid := e.ComicID + ":" + strconv.FormatInt(e.Gen, 10)
		switch e.Kind {
		case EventListed:
			zero, zeroMs := splitMs(0)
			err = sessBatch.Append(sid, e.ComicID, uint32(e.Gen), at, atMs, zero, zeroMs, uint8(0), c.Publisher, c.Series, c.Title,
				c.Issue, uint16(c.Year), float32(c.Grade), flag(c.KeyIssue), c.PriceCents, "", "", e.TraceID)
			sessions++
		case EventSold:
			open, openMs := splitMs(e.ListedAtMs)
			err = sessBatch.Append(sid, e.ComicID, uint32(e.Gen), open, openMs, at, atMs, uint8(1), c.Publisher, c.Series, c.Title,
				c.Issue, uint16(c.Year), float32(c.Grade), flag(c.KeyIssue), e.PriceCents, e.Email, e.TxnID, e.TraceID)
			sessions++
		}
		if err != nil {
			errs[i] = stream.Permanentf("comic: session row: %v", err)
		}
	}
	if err := evBatch.Send(); err != nil {
		_ = sessBatch.Abort()
		return fmt.Errorf("comic: insert events: %w", err)
	}
	if sessions > 0 {
		if err := sessBatch.Send(); err != nil {
			return fmt.Errorf("comic: insert sessions: %w", err)
		}
	} else {
		_ = sessBatch.Abort()
	}
	for _, err := range errs {
		if err != nil {
			return &stream.BatchError{Errs: errs}
		}
	}
	return nil
}

func flag(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// SnapshotStats writes the current subscription statistics to
// comic_pattern_stats, stamped with now truncated to the minute (a second
// snapshot in the same minute replaces the first on merge). A "pattern"
// row carries the pattern's subscriptions, its bloated value sets in
// distinct_values and their extra shards in top_count; a "field" row the
// field's FieldStat.
func (h *History) SnapshotStats(ctx context.Context, now time.Time) error {
	st, err := h.store.Stats(ctx)
	if err != nil {
		return err
	}
	b, err := h.ch.Conn().PrepareBatch(ctx, insertStats)
	if err != nil {
		return fmt.Errorf("comic: stats snapshot: %w", err)
	}
	at := now.UTC().Truncate(time.Minute)
	for _, p := range st.Patterns {
		if err := b.Append(at, "pattern", p.Pattern, p.Subscriptions, int64(p.BloatedValueSets), "", int64(p.ExtraShards), 0.0); err != nil {
			_ = b.Abort()
			return fmt.Errorf("comic: stats snapshot: %w", err)
		}
	}
	for _, f := range st.Fields {
		if err := b.Append(at, "field", f.Field, f.Subscriptions, f.Distinct, f.TopValue, f.TopCount, f.Diversity); err != nil {
			_ = b.Abort()
			return fmt.Errorf("comic: stats snapshot: %w", err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("comic: stats snapshot: %w", err)
	}
	return nil
}

// RunSnapshots snapshots the statistics every interval until ctx ends;
// failures are retried at the next tick.
func (h *History) RunSnapshots(ctx context.Context, interval time.Duration, onErr func(error)) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := h.SnapshotStats(ctx, time.Now()); err != nil && ctx.Err() == nil && onErr != nil {
			onErr(err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
