package clickhouse

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Filter narrows the exact counts. The zero Filter counts everything.
type Filter struct {
	// From is the inclusive lower bound on the table's time column (runs and
	// transitions: run_at; sessions: opened_at). Zero: no lower bound.
	From time.Time
	// To is the exclusive upper bound on the same column. Zero: no upper
	// bound.
	To time.Time
	// Provider keeps rows of one provider. Empty: every provider.
	Provider string
	// SourceID keeps rows of one source. Empty: every source.
	SourceID string
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

// SessionCounts are exact counts of distinct sessions.
type SessionCounts struct {
	// Total is the number of distinct sessions.
	Total uint64
	// Open is the number whose latest version is open.
	Open uint64
	// Closed is the number whose latest version is closed.
	Closed uint64
}

// CountSessions returns the number of distinct sessions (by session_id)
// matching f (From and To bound opened_at), and how many of them are open
// and closed by their latest version. It is exact before merges.
func CountSessions(ctx context.Context, c *Client, f Filter) (SessionCounts, error) {
	where, args := f.where("opened_at")
	q := `SELECT count(), countIf(st = '` + SessionOpen + `'), countIf(st = '` + SessionClosed + `')
FROM (SELECT session_id, argMax(state, version) AS st FROM ` + TableSessions + where + ` GROUP BY session_id)`
	var n SessionCounts
	if err := c.conn.QueryRow(ctx, q, args...).Scan(&n.Total, &n.Open, &n.Closed); err != nil {
		return SessionCounts{}, fmt.Errorf("clickhouse: count %s: %w", TableSessions, err)
	}
	return n, nil
}

func count(ctx context.Context, c *Client, table, q string, args []any) (uint64, error) {
	var n uint64
	if err := c.conn.QueryRow(ctx, q, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("clickhouse: count %s: %w", table, err)
	}
	return n, nil
}

// EntitySessions returns the sessions of one entity, latest version of each
// (FINAL), oldest first, at most limit of them (limit < 1: 100).
func EntitySessions(ctx context.Context, c *Client, entityKey string, limit int) ([]SessionRow, error) {
	if limit < 1 {
		limit = 100
	}
	q := `SELECT session_id, entity_key, entity_kind, provider, venue, venue_name, date, slot_time,
	party_size, scope_key, source_id, open_run_id, close_run_id, opened_at, opened_at_ms, closed_at,
	closed_at_ms, duration_ms, state, trace_id
FROM ` + TableSessions + ` FINAL WHERE entity_key = ? ORDER BY opened_at, opened_at_ms, session_id LIMIT ?`
	rows, err := c.conn.Query(ctx, q, entityKey, limit)
	if err != nil {
		return nil, fmt.Errorf("clickhouse: sessions of %q: %w", entityKey, err)
	}
	defer rows.Close()
	var out []SessionRow
	for rows.Next() {
		var r SessionRow
		var opened, closed time.Time
		var openedMs, closedMs uint16
		var durMs uint64
		var state string
		if err := rows.Scan(&r.SessionID, &r.EntityKey, &r.EntityKind, &r.Provider, &r.Venue,
			&r.VenueName, &r.Date, &r.SlotTime, &r.PartySize, &r.ScopeKey, &r.SourceID, &r.OpenRunID,
			&r.CloseRunID, &opened, &openedMs, &closed, &closedMs, &durMs, &state, &r.TraceID); err != nil {
			return nil, fmt.Errorf("clickhouse: sessions of %q: %w", entityKey, err)
		}
		r.OpenedAt, r.ClosedAt = joinTime(opened, openedMs), joinTime(closed, closedMs)
		r.Duration = time.Duration(durMs) * time.Millisecond
		r.Closed = state == SessionClosed
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("clickhouse: sessions of %q: %w", entityKey, err)
	}
	return out, nil
}
