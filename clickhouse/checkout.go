package clickhouse

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

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

// CheckoutStats are exact figures over the finished attempts.
type CheckoutStats struct {
	// Attempts, Succeeded and Failed count distinct attempts.
	Attempts, Succeeded, Failed uint64
	// Orders counts distinct orders with an attempt.
	Orders uint64
	// Compensated counts failed attempts that undid at least one effect.
	Compensated uint64
	// DurationP50 and DurationP99 are quantiles of duration_ms.
	DurationP50, DurationP99 time.Duration
	// Reasons counts failed attempts by reason.
	Reasons map[string]uint64
}

// CheckoutSagaStats returns exact attempt counts (FINAL), duration
// quantiles and failure reasons.
func CheckoutSagaStats(ctx context.Context, c *Client) (CheckoutStats, error) {
	var s CheckoutStats
	q := `SELECT count(), countIf(status = 'succeeded'), countIf(status = 'failed'), uniqExact(order_id),
	countIf(status = 'failed' AND compensated > 0), quantileExact(0.5)(duration_ms), quantileExact(0.99)(duration_ms)
FROM ` + TableCheckoutSagas + ` FINAL`
	var d50, d99 uint32
	if err := c.conn.QueryRow(ctx, q).Scan(&s.Attempts, &s.Succeeded, &s.Failed, &s.Orders, &s.Compensated, &d50, &d99); err != nil {
		return s, fmt.Errorf("clickhouse: checkout stats: %w", err)
	}
	s.DurationP50, s.DurationP99 = time.Duration(d50)*time.Millisecond, time.Duration(d99)*time.Millisecond
	rows, err := c.conn.Query(ctx, `SELECT reason, count() FROM `+TableCheckoutSagas+` FINAL WHERE status = 'failed' GROUP BY reason`)
	if err != nil {
		return s, fmt.Errorf("clickhouse: checkout failure reasons: %w", err)
	}
	defer rows.Close()
	s.Reasons = map[string]uint64{}
	for rows.Next() {
		var reason string
		var n uint64
		if err := rows.Scan(&reason, &n); err != nil {
			return s, fmt.Errorf("clickhouse: checkout failure reasons: %w", err)
		}
		s.Reasons[reason] = n
	}
	return s, rows.Err()
}
