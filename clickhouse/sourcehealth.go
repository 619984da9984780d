package clickhouse

import (
	"context"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// TableSourceHealth is the health history of the availability sources
// (schema/0008_source_health.sql).
const TableSourceHealth = "source_health"

// SourceHealthRow is one health transition of a source. Rows with the same
// EventID are duplicates and collapse into one.
type SourceHealthRow struct {
	EventID             string
	SourceID            string
	Provider            string
	Status              string // "down" or "up"
	RunID               string
	At                  time.Time
	ConsecutiveFailures uint32
	// BlindSince is the last good answer before the source went down
	// (zero when unknown); BlindForSeconds, on "up", how long it was blind.
	BlindSince      time.Time
	BlindForSeconds uint32
	Error           string
	TraceID         string
}

const insertSourceHealth = "INSERT INTO " + TableSourceHealth + ` (event_id, source_id, provider, status, run_id,
	at, at_ms, consecutive_failures, blind_since, blind_for_seconds, error, trace_id)`

// InsertSourceHealth appends rows in one batch; inserting them again is
// harmless, duplicates collapse.
func InsertSourceHealth(ctx context.Context, c *Client, rows []SourceHealthRow) error {
	return insert(ctx, c, TableSourceHealth, insertSourceHealth, len(rows), func(b driver.Batch, i int) error {
		r := &rows[i]
		at, atMs := splitTime(r.At)
		since, _ := splitTime(r.BlindSince)
		return b.Append(r.EventID, r.SourceID, r.Provider, r.Status, r.RunID, at, atMs, r.ConsecutiveFailures, since,
			r.BlindForSeconds, r.Error, r.TraceID)
	})
}
