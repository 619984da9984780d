package clickhouse

import (
	"context"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// TableFeedItemEvents is the feed item history (schema/0007_feed_items.sql).
const TableFeedItemEvents = "feed_item_events"

// FeedItemEventRow is one step of a feed item's history. Rows with the same
// EventID are duplicates and collapse into one.
type FeedItemEventRow struct {
	EventID      string
	FeedID       string
	IID          string
	GUID         string
	Kind         string
	At           time.Time
	ContentHash  string
	Subscribable string
	Within       string
	TraceID      string
}

const insertFeedItemEvents = "INSERT INTO " + TableFeedItemEvents + ` (event_id, feed_id, iid, guid, kind,
	at, at_ms, content_hash, subscribable, within, trace_id)`

// InsertFeedItemEvents appends rows in one batch; inserting them again is
// harmless, duplicates collapse.
func InsertFeedItemEvents(ctx context.Context, c *Client, rows []FeedItemEventRow) error {
	return insert(ctx, c, TableFeedItemEvents, insertFeedItemEvents, len(rows), func(b driver.Batch, i int) error {
		r := &rows[i]
		at, atMs := splitTime(r.At)
		return b.Append(r.EventID, r.FeedID, r.IID, r.GUID, r.Kind, at, atMs, r.ContentHash, r.Subscribable, r.Within, r.TraceID)
	})
}
