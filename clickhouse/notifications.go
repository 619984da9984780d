package clickhouse

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

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
		rows, err := c.conn.Query(ctx, q, eventID)
		if err != nil {
			return out, fmt.Errorf("clickhouse: transition %q: %w", eventID, err)
		}
		for rows.Next() {
			var t TransitionRow
			var at time.Time
			var ms uint16
			var raw, stable uint8
			if err := rows.Scan(&t.EventID, &t.RunID, &at, &ms, &t.Kind, &raw, &stable, &t.EntityKey, &t.Provider, &t.Venue, &t.TraceID); err != nil {
				rows.Close()
				return out, fmt.Errorf("clickhouse: transition %q: %w", eventID, err)
			}
			t.RunAt, t.Raw, t.Stable = joinTime(at, ms), raw == 1, stable == 1
			out.Transition = &t
		}
		rows.Close()
		if out.Transition != nil && runID == "" {
			runID = out.Transition.RunID
		}
	}
	if runID != "" {
		q := `SELECT run_id, source_id, provider, scope_key, run_at, run_at_ms, status, trace_id
FROM ` + TableRuns + ` WHERE run_id = ? ORDER BY applied DESC LIMIT 1`
		rows, err := c.conn.Query(ctx, q, runID)
		if err != nil {
			return out, fmt.Errorf("clickhouse: run %q: %w", runID, err)
		}
		defer rows.Close()
		for rows.Next() {
			var r RunRow
			var at time.Time
			var ms uint16
			if err := rows.Scan(&r.RunID, &r.SourceID, &r.Provider, &r.ScopeKey, &at, &ms, &r.Status, &r.TraceID); err != nil {
				return out, fmt.Errorf("clickhouse: run %q: %w", runID, err)
			}
			r.RunAt = joinTime(at, ms)
			out.Run = &r
		}
	}
	return out, nil
}
