package clickhouse

import (
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
