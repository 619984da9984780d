package clickhouse

import (
	"context"
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
