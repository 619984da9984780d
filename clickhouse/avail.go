package clickhouse

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Table names of the availability schema (schema/0001_availability.sql).
const (
	TableRuns        = "runs"
	TableTransitions = "transitions"
	TableSessions    = "sessions"
)

// Session states, the sessions.state column.
const (
	SessionOpen   = "open"
	SessionClosed = "closed"
)

// RunRow is one row of the runs table: the outcome of one poll run.
type RunRow struct {
	RunID     string
	SourceID  string
	Provider  string
	ScopeKey  string
	StartedAt time.Time
	RunAt     time.Time
	Status    string
	Error     string
	Observed  uint32
	Opened    uint32
	Closed    uint32
	// Applied is false for a replayed or out-of-date run; for the same
	// RunID an applied row replaces an unapplied one.
	Applied bool
	TraceID string
}

// TransitionRow is one row of the transitions table. EventID identifies the
// transition: rows with the same EventID (and so the same RunAt and entity)
// are duplicates and collapse into one.
type TransitionRow struct {
	EventID string
	RunID   string
	RunAt   time.Time
	Kind    string // "open" or "close"
	// Raw marks a raw flip, Stable a stable one; a flip may be both.
	Raw        bool
	Stable     bool
	Baseline   bool
	Notify     bool
	EntityKey  string
	EntityKind string
	Provider   string
	Venue      string
	VenueName  string
	Date       string
	SlotTime   string
	PartySize  uint16
	ScopeKey   string
	SourceID   string
	LastSeen   time.Time
	TraceID    string
}

// SessionRow is one version of an availability session. The open version
// (Closed false) has ClosedAt zero and Duration 0; a closed version replaces
// it in the table (see Version). All versions must carry the same OpenedAt.
type SessionRow struct {
	SessionID  string
	EntityKey  string
	EntityKind string
	Provider   string
	Venue      string
	VenueName  string
	Date       string
	SlotTime   string
	PartySize  uint16
	ScopeKey   string
	SourceID   string
	OpenRunID  string
	CloseRunID string
	OpenedAt   time.Time
	ClosedAt   time.Time
	Duration   time.Duration
	Closed     bool
	TraceID    string
}

// closedVersionBase is above every open version and every close time in
// milliseconds until the year 10889.
const closedVersionBase = 1 << 48

// Version is the row's ReplacingMergeTree version: 1 for the open row, and
// for a closed row 2^48 minus ClosedAt in Unix milliseconds. So a closed row
// replaces the open row, and of two closed rows of one session the earlier
// close wins: a session ends at the first close after its open, and a writer
// that paired the open with a later close before it knew the first one is
// corrected when it learns it.
func (r SessionRow) Version() uint64 {
	if !r.Closed {
		return 1
	}
	ms := min(max(r.ClosedAt.UnixMilli(), 0), closedVersionBase-2)
	return uint64(closedVersionBase - ms)
}

// State is SessionOpen or SessionClosed.
func (r SessionRow) State() string {
	if r.Closed {
		return SessionClosed
	}
	return SessionOpen
}

const (
	insertRuns = "INSERT INTO " + TableRuns + ` (run_id, source_id, provider, scope_key,
	started_at, started_at_ms, run_at, run_at_ms, status, error, observed, opened, closed, applied, trace_id)`
	insertTransitions = "INSERT INTO " + TableTransitions + ` (event_id, run_id, run_at, run_at_ms,
	kind, raw, stable, baseline, notify, entity_key, entity_kind, provider, venue, venue_name, date,
	slot_time, party_size, scope_key, source_id, last_seen, trace_id)`
	insertSessions = "INSERT INTO " + TableSessions + ` (session_id, entity_key, entity_kind,
	provider, venue, venue_name, date, slot_time, party_size, scope_key, source_id, open_run_id,
	close_run_id, opened_at, opened_at_ms, closed_at, closed_at_ms, duration_ms, state, version, trace_id)`
)

// InsertRuns appends rows to the runs table in one batch (one INSERT with
// named columns). Nothing is sent for no rows. On error some rows may have
// been written; inserting them again is harmless, duplicates collapse.
func InsertRuns(ctx context.Context, c *Client, rows []RunRow) error {
	return insert(ctx, c, TableRuns, insertRuns, len(rows), func(b driver.Batch, i int) error {
		r := &rows[i]
		started, startedMs := splitTime(r.StartedAt)
		at, atMs := splitTime(r.RunAt)
		return b.Append(r.RunID, r.SourceID, r.Provider, r.ScopeKey, started, startedMs, at, atMs,
			r.Status, r.Error, r.Observed, r.Opened, r.Closed, flag(r.Applied), r.TraceID)
	})
}

// InsertTransitions appends rows to the transitions table in one batch, like
// InsertRuns.
func InsertTransitions(ctx context.Context, c *Client, rows []TransitionRow) error {
	return insert(ctx, c, TableTransitions, insertTransitions, len(rows), func(b driver.Batch, i int) error {
		r := &rows[i]
		at, atMs := splitTime(r.RunAt)
		seen, _ := splitTime(r.LastSeen)
		return b.Append(r.EventID, r.RunID, at, atMs, r.Kind, flag(r.Raw), flag(r.Stable), flag(r.Baseline),
			flag(r.Notify), r.EntityKey, r.EntityKind, r.Provider, r.Venue, r.VenueName, r.Date,
			r.SlotTime, r.PartySize, r.ScopeKey, r.SourceID, seen, r.TraceID)
	})
}

// InsertSessions appends rows to the sessions table in one batch, like
// InsertRuns. The table keeps, per SessionID, the row of highest version.
func InsertSessions(ctx context.Context, c *Client, rows []SessionRow) error {
	return insert(ctx, c, TableSessions, insertSessions, len(rows), func(b driver.Batch, i int) error {
		r := &rows[i]
		opened, openedMs := splitTime(r.OpenedAt)
		closed, closedMs := splitTime(r.ClosedAt)
		return b.Append(r.SessionID, r.EntityKey, r.EntityKind, r.Provider, r.Venue, r.VenueName,
			r.Date, r.SlotTime, r.PartySize, r.ScopeKey, r.SourceID, r.OpenRunID, r.CloseRunID,
			opened, openedMs, closed, closedMs, uint64(max(r.Duration, 0).Milliseconds()),
			r.State(), r.Version(), r.TraceID)
	})
}

// insert prepares one batch for query, appends n rows with appendRow and
// sends it.
func insert(ctx context.Context, c *Client, table, query string, n int, appendRow func(driver.Batch, int) error) error {
	if n == 0 {
		return nil
	}
	batch, err := c.conn.PrepareBatch(ctx, query)
	if err != nil {
		return fmt.Errorf("clickhouse: insert into %s: prepare: %w", table, err)
	}
	for i := range n {
		if err := appendRow(batch, i); err != nil {
			_ = batch.Abort()
			return fmt.Errorf("clickhouse: insert into %s: row %d: %w", table, i, err)
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("clickhouse: insert %d rows into %s: %w", n, table, err)
	}
	return nil
}

// maxDateTime is the last second a DateTime column holds (2106-02-07).
var maxDateTime = time.Unix(1<<32-1, 0).UTC()

// splitTime returns t as a DateTime (whole seconds, UTC, clamped to the
// column's range; the zero time becomes 1970-01-01) and its milliseconds.
func splitTime(t time.Time) (time.Time, uint16) {
	if t.Unix() <= 0 {
		return time.Unix(0, 0).UTC(), 0
	}
	if t.After(maxDateTime) {
		return maxDateTime, 0
	}
	t = t.UTC()
	return t.Truncate(time.Second), uint16(t.Nanosecond() / int(time.Millisecond))
}

// joinTime is the inverse of splitTime; 1970-01-01 gives the zero time.
func joinTime(sec time.Time, ms uint16) time.Time {
	if sec.Unix() <= 0 && ms == 0 {
		return time.Time{}
	}
	return sec.UTC().Add(time.Duration(ms) * time.Millisecond)
}

func flag(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}
