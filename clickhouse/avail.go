package clickhouse

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"time"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
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

// TransitionRow is one row of the transitions table; rows with the same
// EventID collapse into one.
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

// SessionRow is one version of an availability session; a closed version
// replaces the open one. All versions carry the same OpenedAt.
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

// Version is the row's ReplacingMergeTree version: 1 open, 2^48 minus
// ClosedAt in Unix ms closed, so a close replaces the open row and the
// earliest close wins.
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

// InsertRuns appends the rows of batches to the runs table in one INSERT;
// inserting them again is harmless.
func InsertRuns(ctx context.Context, c *Client, batches ...[]RunRow) error {
	n := RowCount(batches)
	runID, source, provider, scope, status, errText, trace := strs(n), strs(n), strs(n), strs(n), strs(n), strs(n), strs(n)
	started, startedMs, at, atMs := times(n), u16s(n), times(n), u16s(n)
	observed, opened, closed, applied := make([]uint32, n), make([]uint32, n), make([]uint32, n), make([]uint8, n)
	eachRow(batches, func(i int, r *RunRow) {
		runID[i], source[i], provider[i], scope[i] = r.RunID, r.SourceID, r.Provider, r.ScopeKey
		started[i], startedMs[i] = splitTime(r.StartedAt)
		at[i], atMs[i] = splitTime(r.RunAt)
		status[i], errText[i], trace[i] = r.Status, r.Error, r.TraceID
		observed[i], opened[i], closed[i], applied[i] = r.Observed, r.Opened, r.Closed, flag(r.Applied)
	})
	return insertColumns(ctx, c, TableRuns, insertRuns, n, []any{runID, source, provider, scope, started, startedMs,
		at, atMs, status, errText, observed, opened, closed, applied, trace})
}

// InsertTransitions appends the rows of batches to the transitions table in
// one batch, like InsertRuns.
func InsertTransitions(ctx context.Context, c *Client, batches ...[]TransitionRow) error {
	n := RowCount(batches)
	event, run, kind, key, entKind, provider, venue, name, date, slot, scope, source, trace :=
		strs(n), strs(n), strs(n), strs(n), strs(n), strs(n), strs(n), strs(n), strs(n), strs(n), strs(n), strs(n), strs(n)
	at, atMs, seen := times(n), u16s(n), times(n)
	raw, stable, baseline, notify, party := make([]uint8, n), make([]uint8, n), make([]uint8, n), make([]uint8, n), u16s(n)
	eachRow(batches, func(i int, r *TransitionRow) {
		event[i], run[i], kind[i] = r.EventID, r.RunID, r.Kind
		at[i], atMs[i] = splitTime(r.RunAt)
		seen[i], _ = splitTime(r.LastSeen)
		raw[i], stable[i], baseline[i], notify[i] = flag(r.Raw), flag(r.Stable), flag(r.Baseline), flag(r.Notify)
		key[i], entKind[i], provider[i], venue[i], name[i] = r.EntityKey, r.EntityKind, r.Provider, r.Venue, r.VenueName
		date[i], slot[i], party[i], scope[i], source[i], trace[i] = r.Date, r.SlotTime, r.PartySize, r.ScopeKey, r.SourceID, r.TraceID
	})
	return insertColumns(ctx, c, TableTransitions, insertTransitions, n, []any{event, run, at, atMs, kind, raw, stable,
		baseline, notify, key, entKind, provider, venue, name, date, slot, party, scope, source, seen, trace})
}

// InsertSessions appends the rows of batches to the sessions table like
// InsertRuns.
func InsertSessions(ctx context.Context, c *Client, batches ...[]SessionRow) error {
	n := RowCount(batches)
	id, key, entKind, provider, venue, name, date, slot, scope, source, openRun, closeRun, state, trace :=
		strs(n), strs(n), strs(n), strs(n), strs(n), strs(n), strs(n), strs(n), strs(n), strs(n), strs(n), strs(n), strs(n), strs(n)
	opened, openedMs, closed, closedMs, party := times(n), u16s(n), times(n), u16s(n), u16s(n)
	duration, version := make([]uint64, n), make([]uint64, n)
	eachRow(batches, func(i int, r *SessionRow) {
		id[i], key[i], entKind[i], provider[i], venue[i], name[i] = r.SessionID, r.EntityKey, r.EntityKind, r.Provider, r.Venue, r.VenueName
		date[i], slot[i], party[i], scope[i], source[i] = r.Date, r.SlotTime, r.PartySize, r.ScopeKey, r.SourceID
		openRun[i], closeRun[i] = r.OpenRunID, r.CloseRunID
		opened[i], openedMs[i] = splitTime(r.OpenedAt)
		closed[i], closedMs[i] = splitTime(r.ClosedAt)
		duration[i], state[i], version[i], trace[i] = uint64(max(r.Duration, 0).Milliseconds()), r.State(), r.Version(), r.TraceID
	})
	return insertColumns(ctx, c, TableSessions, insertSessions, n, []any{id, key, entKind, provider, venue, name, date,
		slot, party, scope, source, openRun, closeRun, opened, openedMs, closed, closedMs, duration, state, version, trace})
}

// RowCount is the number of rows of batches, as the Insert functions
// that take batches count them.
func RowCount[T any](batches [][]T) int {
	n := 0
	for _, b := range batches {
		n += len(b)
	}
	return n
}

// eachRow calls f with every row of batches, numbered from 0 in order.
func eachRow[T any](batches [][]T, f func(i int, r *T)) {
	i := 0
	for _, b := range batches {
		for j := range b {
			f(i, &b[j])
			i++
		}
	}
}

func strs(n int) []string     { return make([]string, n) }
func times(n int) []time.Time { return make([]time.Time, n) }
func u16s(n int) []uint16     { return make([]uint16, n) }

// InsertRows appends rows, each in query's column order, to table in one
// batch; no rows send nothing.
func InsertRows(ctx context.Context, c *Client, table, query string, rows [][]any) error {
	return insert(ctx, c, table, query, len(rows), func(b driver.Batch, i int) error { return b.Append(rows[i]...) })
}

// insert prepares one batch for query, appends n rows with appendRow and
// sends it.
func insert(ctx context.Context, c *Client, table, query string, n int, appendRow func(driver.Batch, int) error) error {
	return send(ctx, c, table, query, n, func(batch driver.Batch) error {
		for i := range n {
			if err := appendRow(batch, i); err != nil {
				return fmt.Errorf("row %d: %w", i, err)
			}
		}
		return nil
	})
}

// insertColumns is insert with n rows given column by column (cols[i] is a
// slice of column i's values), far cheaper than row by row.
func insertColumns(ctx context.Context, c *Client, table, query string, n int, cols []any) error {
	return send(ctx, c, table, query, n, func(batch driver.Batch) error {
		for i, col := range cols {
			if s, ok := col.([]string); ok && i < len(batch.Columns()) {
				reserveStrings(batch.Columns()[i], s)
			}
			if err := batch.Column(i).Append(col); err != nil {
				return fmt.Errorf("column %d: %w", i, err)
			}
		}
		return nil
	})
}

// send prepares one batch for query, fills it with n rows and sends it; no
// rows send nothing.
func send(ctx context.Context, c *Client, table, query string, n int, fill func(driver.Batch) error) error {
	if n == 0 {
		return nil
	}
	batch, err := c.conn.PrepareBatch(ctx, query)
	if err != nil {
		return fmt.Errorf("clickhouse: insert into %s: prepare: %w", table, err)
	}
	if err := fill(batch); err != nil {
		_ = batch.Abort()
		return fmt.Errorf("clickhouse: insert into %s: %w", table, err)
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("clickhouse: insert %d rows into %s: %w", n, table, err)
	}
	return nil
}

// minReserve is the number of values from which reserveStrings reserves
// room.
const minReserve = 1024

// reserveStrings sizes the byte buffer of col, an empty String column, for
// vals at once: growing it string by string was the client's largest cost
// of a large insert. It decodes one string as long as them all, then Reset
// empties the column and keeps the buffer.
func reserveStrings(col column.Interface, vals []string) {
	if col.Type() != "String" || col.Rows() != 0 || len(vals) < minReserve {
		return
	}
	size := 0
	for _, v := range vals {
		size += len(v)
	}
	head := binary.AppendUvarint(nil, uint64(size))
	r := proto.NewReader(io.MultiReader(bytes.NewReader(head), io.LimitReader(zeros{}, int64(size))))
	_ = col.Decode(r, 1)
	col.Reset()
}

// zeros reads forever without writing, for reserveStrings.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	return len(p), nil
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
