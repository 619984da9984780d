package clickhouse

import (
	"context"
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
