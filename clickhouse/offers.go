package clickhouse

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

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

// OfferRequestCounts are exact counts of distinct search calls by outcome.
type OfferRequestCounts struct {
	Total uint64
	// ByOutcome counts calls per outcome (hit, join, miss, seen, gone).
	ByOutcome map[string]uint64
}

// CountOfferRequests counts distinct search calls (by request_id) of one
// result, or of every result when resultID is empty, exact before merges.
func CountOfferRequests(ctx context.Context, c *Client, resultID string) (OfferRequestCounts, error) {
	where, args := "", []any{}
	if resultID != "" {
		where, args = " WHERE result_id = ?", append(args, resultID)
	}
	rows, err := c.conn.Query(ctx, `SELECT outcome, uniqExact(request_id) FROM (
		SELECT request_id, argMax(outcome, at) AS outcome FROM `+TableOfferRequests+where+` GROUP BY request_id
	) GROUP BY outcome`, args...)
	if err != nil {
		return OfferRequestCounts{}, fmt.Errorf("clickhouse: count %s: %w", TableOfferRequests, err)
	}
	defer rows.Close()
	out := OfferRequestCounts{ByOutcome: map[string]uint64{}}
	for rows.Next() {
		var outcome string
		var n uint64
		if err := rows.Scan(&outcome, &n); err != nil {
			return OfferRequestCounts{}, fmt.Errorf("clickhouse: count %s: %w", TableOfferRequests, err)
		}
		out.ByOutcome[outcome] = n
		out.Total += n
	}
	if err := rows.Err(); err != nil {
		return OfferRequestCounts{}, fmt.Errorf("clickhouse: count %s: %w", TableOfferRequests, err)
	}
	return out, nil
}
