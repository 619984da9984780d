package clickhouse

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Filter narrows the exact counts. The zero Filter counts everything.
type Filter struct {
	// From and To bound the table's time column (run_at; sessions:
	// opened_at), From inclusive, To exclusive. Zero: no bound.
	From, To time.Time
	// Provider and SourceID keep rows of one provider or source. Empty: all.
	Provider, SourceID string
}

// where returns the WHERE clause (possibly empty) for timeCol and its
// arguments. Times are bound as Unix seconds, which every server version
// accepts in toDateTime.
func (f Filter) where(timeCol string) (string, []any) {
	var conds []string
	var args []any
	if !f.From.IsZero() {
		conds = append(conds, timeCol+" >= toDateTime(?)")
		args = append(args, f.From.Unix())
	}
	if !f.To.IsZero() {
		conds = append(conds, timeCol+" < toDateTime(?)")
		args = append(args, f.To.Unix())
	}
	if f.Provider != "" {
		conds = append(conds, "provider = ?")
		args = append(args, f.Provider)
	}
	if f.SourceID != "" {
		conds = append(conds, "source_id = ?")
		args = append(args, f.SourceID)
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

// CountTransitions returns the number of distinct transitions (by event_id)
// matching f. It is exact before merges: duplicates of one event count once.
func CountTransitions(ctx context.Context, c *Client, f Filter) (uint64, error) {
	where, args := f.where("run_at")
	return count(ctx, c, TableTransitions, "SELECT uniqExact(event_id) FROM "+TableTransitions+where, args)
}

// CountRuns returns the number of distinct runs (by run_id) matching f,
// exact before merges.
func CountRuns(ctx context.Context, c *Client, f Filter) (uint64, error) {
	where, args := f.where("run_at")
	return count(ctx, c, TableRuns, "SELECT uniqExact(run_id) FROM "+TableRuns+where, args)
}

// QueryRows runs q and returns its rows as scan reads them; what names the
// query in errors.
func QueryRows[T any](ctx context.Context, c *Client, what, q string, args []any, scan func(driver.Rows) (T, error)) ([]T, error) {
	rows, err := c.conn.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("clickhouse: %s: %w", what, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("clickhouse: %s: %w", what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("clickhouse: %s: %w", what, err)
	}
	return out, nil
}

// scanOne reads a row of one column.
func scanOne[T any](rows driver.Rows) (T, error) {
	var v T
	err := rows.Scan(&v)
	return v, err
}

func count(ctx context.Context, c *Client, table, q string, args []any) (uint64, error) {
	var n uint64
	if err := c.conn.QueryRow(ctx, q, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("clickhouse: count %s: %w", table, err)
	}
	return n, nil
}

// TableNotifications is the notifier's history table
// (schema/0002_notifications.sql).
const TableNotifications = "notifications"

// NotificationRow is one record of a notification: a try, a send, a hold.
type NotificationRow struct {
	NotificationID string
	Flow           string
	Event          string
	SubscriberID   string
	DestinationID  string
	Channel        string
	Subject        string
	Window         string
	Status         string
	Attempts       uint16
	Critical       bool
	ObservedAt     time.Time
	RecordedAt     time.Time
	LatencyMs      uint64
	TraceID        string
	EventID        string
	RunID          string
	MessageID      string
	Error          string
}

// statusRank orders the statuses of one instant: a send beats a failure.
var statusRank = map[string]uint64{"failed": 1, "suppressed": 2, "batched": 3, "held": 3, "rejected": 4, "sent": 5}

// Version is the row's ReplacingMergeTree version: RecordedAt in ms × 8
// plus the status's rank, so the newest record wins, and a send recorded in
// the same millisecond as a failure wins over it.
func (r NotificationRow) Version() uint64 {
	return uint64(max(r.RecordedAt.UnixMilli(), 0))*8 + statusRank[r.Status]
}

const insertNotifications = "INSERT INTO " + TableNotifications + ` (notification_id, flow, event, subscriber_id,
	destination_id, channel, subject, window_key, status, attempts, critical, observed_at, observed_at_ms,
	recorded_at, recorded_at_ms, latency_ms, trace_id, event_id, run_id, message_id, error, version)`

// InsertNotifications appends rows in one batch (one INSERT with named
// columns). Inserting a row again is harmless: duplicates collapse.
func InsertNotifications(ctx context.Context, c *Client, rows []NotificationRow) error {
	return insert(ctx, c, TableNotifications, insertNotifications, len(rows), func(b driver.Batch, i int) error {
		r := &rows[i]
		obs, obsMs := splitTime(r.ObservedAt)
		rec, recMs := splitTime(r.RecordedAt)
		return b.Append(r.NotificationID, r.Flow, r.Event, r.SubscriberID, r.DestinationID, r.Channel, r.Subject, r.Window,
			r.Status, r.Attempts, flag(r.Critical), obs, obsMs, rec, recMs, r.LatencyMs, r.TraceID, r.EventID, r.RunID,
			r.MessageID, r.Error, r.Version())
	})
}

// Cause is what a notification came from: its transition and that
// transition's run, as far as ClickHouse holds them.
type Cause struct {
	Transition *TransitionRow
	Run        *RunRow
}

// NotificationCause looks up the transition eventID and the run runID
// (either may be empty). Missing rows leave their field nil.
func NotificationCause(ctx context.Context, c *Client, eventID, runID string) (Cause, error) {
	var out Cause
	if eventID != "" {
		q := `SELECT event_id, run_id, run_at, run_at_ms, kind, raw, stable, entity_key, provider, venue, trace_id
FROM ` + TableTransitions + ` WHERE event_id = ? LIMIT 1`
		ts, err := QueryRows(ctx, c, fmt.Sprintf("transition %q", eventID), q, []any{eventID}, func(rows driver.Rows) (TransitionRow, error) {
			var t TransitionRow
			var at time.Time
			var ms uint16
			var raw, stable uint8
			err := rows.Scan(&t.EventID, &t.RunID, &at, &ms, &t.Kind, &raw, &stable, &t.EntityKey, &t.Provider, &t.Venue, &t.TraceID)
			t.RunAt, t.Raw, t.Stable = joinTime(at, ms), raw == 1, stable == 1
			return t, err
		})
		if err != nil {
			return out, err
		}
		if len(ts) > 0 {
			out.Transition = &ts[0]
			runID = cmp.Or(runID, ts[0].RunID)
		}
	}
	if runID != "" {
		q := `SELECT run_id, source_id, provider, scope_key, run_at, run_at_ms, status, trace_id
FROM ` + TableRuns + ` WHERE run_id = ? ORDER BY applied DESC LIMIT 1`
		runs, err := QueryRows(ctx, c, fmt.Sprintf("run %q", runID), q, []any{runID}, func(rows driver.Rows) (RunRow, error) {
			var r RunRow
			var at time.Time
			var ms uint16
			err := rows.Scan(&r.RunID, &r.SourceID, &r.Provider, &r.ScopeKey, &at, &ms, &r.Status, &r.TraceID)
			r.RunAt = joinTime(at, ms)
			return r, err
		})
		if err != nil {
			return out, err
		}
		if len(runs) > 0 {
			out.Run = &runs[0]
		}
	}
	return out, nil
}

// TableCheckoutSagas is the checkout saga's attempts table
// (schema/0003_checkout.sql).
const TableCheckoutSagas = "checkout_sagas"

// CheckoutSagaRow is one finished checkout attempt. OrderID and TrNum
// identify it; a redelivered row collapses with the first.
type CheckoutSagaRow struct {
	OrderID     string
	TrNum       uint32
	UserID      string
	Status      string // "succeeded" or "failed"
	Reason      string
	TotalCost   int64
	Parts       uint16
	Compensated uint16
	StartedAt   time.Time
	FinishedAt  time.Time
	// Decide is the time from the start to the decision, Duration to the
	// final status.
	Decide   time.Duration
	Duration time.Duration
	TraceID  string
}

const insertCheckoutSagas = "INSERT INTO " + TableCheckoutSagas + ` (order_id, tr_num, user_id, status, reason,
	total_cost, parts, compensated, started_at, started_at_ms, finished_at, finished_at_ms, decide_ms, duration_ms, trace_id)`

// InsertCheckoutSagas appends rows in one batch; like InsertRuns, a
// partial failure is retried whole and duplicates collapse.
func InsertCheckoutSagas(ctx context.Context, c *Client, rows []CheckoutSagaRow) error {
	return insert(ctx, c, TableCheckoutSagas, insertCheckoutSagas, len(rows), func(b driver.Batch, i int) error {
		r := &rows[i]
		started, startedMs := splitTime(r.StartedAt)
		finished, finishedMs := splitTime(r.FinishedAt)
		return b.Append(r.OrderID, r.TrNum, r.UserID, r.Status, r.Reason, r.TotalCost, r.Parts, r.Compensated,
			started, startedMs, finished, finishedMs, millis32(r.Decide), millis32(r.Duration), r.TraceID)
	})
}

func millis32(d time.Duration) uint32 {
	return uint32(min(max(d.Milliseconds(), 0), 1<<32-1))
}

// TableOfferRequests is the sell-offer search history
// (schema/0004_offers.sql).
const TableOfferRequests = "offer_requests"

// OfferRequestRow is one search call. RequestID identifies the call: rows
// with the same RequestID (and so the same ResultID and At) are duplicates
// and collapse into one.
type OfferRequestRow struct {
	RequestID string
	// ClientID is the client's idempotency key, if it sent one.
	ClientID string
	ResultID string
	At       time.Time
	// Outcome is how the call was served: hit, join, miss, seen or gone.
	Outcome string
	// Status is what it answered: complete, processing (202), expired or gone.
	Status    string
	Wait      time.Duration
	Matches   uint32
	ResultAge time.Duration
	Filter    string
	TraceID   string
}

const insertOfferRequests = "INSERT INTO " + TableOfferRequests + ` (request_id, client_id, result_id, at, at_ms,
	outcome, status, wait_ms, matches, result_age_ms, filter, trace_id)`

// InsertOfferRequests appends rows in one batch (one INSERT with named
// columns). Nothing is sent for no rows; inserting rows again is harmless.
func InsertOfferRequests(ctx context.Context, c *Client, rows []OfferRequestRow) error {
	return insert(ctx, c, TableOfferRequests, insertOfferRequests, len(rows), func(b driver.Batch, i int) error {
		r := &rows[i]
		at, atMs := splitTime(r.At)
		return b.Append(r.RequestID, r.ClientID, r.ResultID, at, atMs, r.Outcome, r.Status,
			uint32(min(max(r.Wait.Milliseconds(), 0), 1<<32-1)), r.Matches, uint64(max(r.ResultAge.Milliseconds(), 0)),
			r.Filter, r.TraceID)
	})
}

// TableFeedItemEvents is the feed item history (schema/0007_feed_items.sql).
const TableFeedItemEvents = "feed_item_events"

// FeedItemEventRow is one step of a feed item's history. Rows with the same
// EventID are duplicates and collapse into one.
type FeedItemEventRow struct {
	EventID      string
	FeedID       string
	IID          string
	GUID         string
	Kind         string
	At           time.Time
	ContentHash  string
	Subscribable string
	Within       string
	TraceID      string
}

const insertFeedItemEvents = "INSERT INTO " + TableFeedItemEvents + ` (event_id, feed_id, iid, guid, kind,
	at, at_ms, content_hash, subscribable, within, trace_id)`

// InsertFeedItemEvents appends rows in one batch; inserting them again is
// harmless, duplicates collapse.
func InsertFeedItemEvents(ctx context.Context, c *Client, rows []FeedItemEventRow) error {
	return insert(ctx, c, TableFeedItemEvents, insertFeedItemEvents, len(rows), func(b driver.Batch, i int) error {
		r := &rows[i]
		at, atMs := splitTime(r.At)
		return b.Append(r.EventID, r.FeedID, r.IID, r.GUID, r.Kind, at, atMs, r.ContentHash, r.Subscribable, r.Within, r.TraceID)
	})
}

// TableSourceHealth is the health history of the availability sources
// (schema/0008_source_health.sql).
const TableSourceHealth = "source_health"

// SourceHealthRow is one health transition of a source. Rows with the same
// EventID are duplicates and collapse into one.
type SourceHealthRow struct {
	EventID             string
	SourceID            string
	Provider            string
	Status              string // "down" or "up"
	RunID               string
	At                  time.Time
	ConsecutiveFailures uint32
	// BlindSince is the last good answer before the source went down
	// (zero when unknown); BlindForSeconds, on "up", how long it was blind.
	BlindSince      time.Time
	BlindForSeconds uint32
	Error           string
	TraceID         string
}

const insertSourceHealth = "INSERT INTO " + TableSourceHealth + ` (event_id, source_id, provider, status, run_id,
	at, at_ms, consecutive_failures, blind_since, blind_for_seconds, error, trace_id)`

// InsertSourceHealth appends rows in one batch; inserting them again is
// harmless, duplicates collapse.
func InsertSourceHealth(ctx context.Context, c *Client, rows []SourceHealthRow) error {
	return insert(ctx, c, TableSourceHealth, insertSourceHealth, len(rows), func(b driver.Batch, i int) error {
		r := &rows[i]
		at, atMs := splitTime(r.At)
		since, _ := splitTime(r.BlindSince)
		return b.Append(r.EventID, r.SourceID, r.Provider, r.Status, r.RunID, at, atMs, r.ConsecutiveFailures, since,
			r.BlindForSeconds, r.Error, r.TraceID)
	})
}
