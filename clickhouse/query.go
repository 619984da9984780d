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

func count(ctx context.Context, c *Client, table, q string, args []any) (uint64, error) {
	var n uint64
	if err := c.conn.QueryRow(ctx, q, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("clickhouse: count %s: %w", table, err)
	}
	return n, nil
}
