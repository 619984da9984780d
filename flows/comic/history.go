package comic

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer/sink"
)

// Event kinds on the events topic.
const (
	EventListed   = "listed"   // a comic entered inventory
	EventNotified = "notified" // a subscriber was notified of a comic
	EventSold     = "sold"     // a comic was sold and left inventory
	// EventForgotten: a notification was removed after a refund, so the
	// subscriber is notified again if the comic comes back.
	EventForgotten = "forgotten"
)

// Event is a TypeEvent payload, in the order of the comic's partition.
type Event struct {
	Kind    string          `json:"kind"`
	ComicID string          `json:"comic_id"`
	Gen     int64           `json:"gen"`
	AtMs    int64           `json:"at_ms"`
	Comic   json.RawMessage `json:"comic,omitempty"`
	// Email and SubscriptionID are set for notified, sold and forgotten.
	Email          string `json:"email,omitempty"`
	SubscriptionID string `json:"subscription_id,omitempty"`
	// TxnID and PriceCents are set for sold.
	TxnID      string `json:"txn_id,omitempty"`
	PriceCents int64  `json:"price_cents,omitempty"`
	TraceID    string `json:"trace_id,omitempty"`
	ListedAtMs int64  `json:"listed_at_ms,omitempty"` // for sold
}

// StageHistory is the stage that writes the events topic to ClickHouse.
const StageHistory = "comic-history"

// HistoryConfig configures the "comic-history" stage: events to
// comic_events, listings and sales to comic_sessions, with deterministic
// ids so redeliveries collapse.
func (s *Flow) HistoryConfig() sink.HistoryConfig[historyRow] {
	return sink.HistoryConfig[historyRow]{Stage: StageHistory, Topic: s.topics.Events,
		Tables: []string{"comic_events", "comic_sessions"}, Rows: historyRows, Insert: insertHistory,
		Runner: stream.RunnerConfig{BatchSize: 1000}}
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
// field of store's statistics to comic_pattern_stats, stamped with now to
// the minute.
func SnapshotStats(ctx context.Context, ch *clickhouse.Client, store *Store, now time.Time) error {
	st, err := store.Stats(ctx)
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
	return clickhouse.InsertRows(ctx, ch, "comic_pattern_stats", insertStats, rows)
}

// PatternStat is a SearchPattern's subscription count and its value sets
// past StoreConfig.BloatThreshold, with their extra shards.
type PatternStat struct {
	Pattern          string `json:"pattern"`
	Subscriptions    int64  `json:"subscriptions"`
	BloatedValueSets int    `json:"bloated_value_sets"`
	ExtraShards      int    `json:"extra_shards"`
}

// FieldStat is a field's diversity: the frequency of its most frequent
// value over the subscriptions that constrain it (1: all ask the same).
type FieldStat struct {
	Field         string  `json:"field"`
	Subscriptions int64   `json:"subscriptions"`
	Distinct      int64   `json:"distinct_values"`
	TopValue      string  `json:"top_value"`
	TopCount      int64   `json:"top_count"`
	Diversity     float64 `json:"diversity"`
}

// Stats is GET /v1/comics/patterns/stats.
type Stats struct {
	Subscriptions  int64         `json:"subscriptions"`
	Patterns       []PatternStat `json:"patterns"`
	Fields         []FieldStat   `json:"fields"`
	BloatThreshold int           `json:"bloat_threshold"`
}

// Stats returns subscriptions per pattern, with their bloated value sets,
// and every field's diversity, in reads bounded by the patterns and fields.
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	pipe := s.rdb.Pipeline()
	patterns := pipe.ZRangeWithScores(ctx, patternsKey, 0, -1)
	bloated := pipe.HGetAll(ctx, bloatKey)
	totals := pipe.HGetAll(ctx, fieldTotalKey)
	total := pipe.HLen(ctx, subsKey)
	tops := make([]*redis.ZSliceCmd, len(fields))
	cards := make([]*redis.IntCmd, len(fields))
	for i, f := range fields {
		tops[i] = pipe.ZRevRangeWithScores(ctx, fieldStatsKey(f.name), 0, 0)
		cards[i] = pipe.ZCard(ctx, fieldStatsKey(f.name))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return Stats{}, fmt.Errorf("comic: stats: %w", err)
	}
	out := Stats{Subscriptions: total.Val(), BloatThreshold: s.cfg.BloatThreshold, Patterns: []PatternStat{}}
	byPattern := map[string]int{}
	for _, z := range patterns.Val() {
		name, _ := z.Member.(string)
		byPattern[name] = len(out.Patterns)
		out.Patterns = append(out.Patterns, PatternStat{Pattern: name, Subscriptions: int64(z.Score)})
	}
	for field, k := range bloated.Val() {
		i, ok := byPattern[field[:max(0, strings.LastIndexByte(field, ':'))]]
		n, _ := strconv.Atoi(k)
		if ok && n > 0 {
			out.Patterns[i].BloatedValueSets++
			out.Patterns[i].ExtraShards += n
		}
	}
	slices.SortFunc(out.Patterns, func(a, b PatternStat) int {
		return cmp.Or(cmp.Compare(b.Subscriptions, a.Subscriptions), strings.Compare(a.Pattern, b.Pattern))
	})
	for i, f := range fields {
		fs := FieldStat{Field: f.name, Distinct: cards[i].Val()}
		fs.Subscriptions, _ = strconv.ParseInt(totals.Val()[f.name], 10, 64)
		if top := tops[i].Val(); len(top) == 1 {
			fs.TopValue, _ = top[0].Member.(string)
			fs.TopCount = int64(top[0].Score)
		}
		if fs.Subscriptions > 0 {
			fs.Diversity = float64(fs.TopCount) / float64(fs.Subscriptions)
		}
		out.Fields = append(out.Fields, fs)
	}
	return out, nil
}

// Notified is one entry of a comic's notification history.
type Notified struct {
	SubscriptionID string `json:"subscription_id"`
	Gen            int64  `json:"gen"`
	Wave           int    `json:"wave,omitempty"`
	AtMs           int64  `json:"at_ms"`
	Channel        string `json:"channel"`
}

// History returns a comic's notification history, email → entry.
func (d *Delivery) History(ctx context.Context, comicID string) (map[string]Notified, error) {
	raw, err := d.rdb.HGetAll(ctx, notifiedKey(d.topics.tag(comicID), comicID)).Result()
	if err != nil {
		return nil, fmt.Errorf("comic: history %s: %w", comicID, err)
	}
	out := make(map[string]Notified, len(raw))
	for email, v := range raw {
		var n Notified
		if err := json.Unmarshal([]byte(v), &n); err != nil {
			return nil, fmt.Errorf("comic: decode history of %s: %w", comicID, err)
		}
		out[email] = n
	}
	return out, nil
}
