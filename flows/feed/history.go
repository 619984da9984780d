package feed

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/stream"
)

// HistoryStage returns the "feed-history" stage appending item history
// events to ClickHouse (table feed_item_events) in batches. Run it only
// with ClickHouse; without it create its group (stream.EnsureGroups) so
// the backlog waits.
func (f *Flow) HistoryStage(ch *clickhouse.Client) stream.Stage {
	return stream.Stage{Name: StageHistory, Topic: f.topics.History, BatchHandler: func(ctx context.Context, msgs []*stream.Message) error {
		rows := make([]clickhouse.FeedItemEventRow, 0, len(msgs))
		errs := make([]error, len(msgs))
		bad := false
		for i, m := range msgs {
			row, err := historyRow(m)
			if err != nil {
				errs[i], bad = err, true
				continue
			}
			rows = append(rows, row)
		}
		if err := clickhouse.InsertFeedItemEvents(ctx, ch, rows); err != nil {
			return err
		}
		if bad {
			return &stream.BatchError{Errs: errs}
		}
		return nil
	}}
}

// historyRow decodes a history event into its row.
func historyRow(m *stream.Message) (clickhouse.FeedItemEventRow, error) {
	e, err := decode[ItemEvent](m, TypeItemEvent)
	if err != nil {
		return clickhouse.FeedItemEventRow{}, err
	}
	at, err := strconv.ParseInt(e.AtMs, 10, 64)
	if err != nil || e.EventID == "" || len(e.EventID) > 512 || len(e.GUID) > 2048 {
		return clickhouse.FeedItemEventRow{}, stream.Permanentf("feed: history event %q malformed", clip(e.EventID, 64))
	}
	traceID := ""
	if tp := m.Metadata[stream.MetaTraceParent]; len(tp) == 55 {
		traceID = strings.Split(tp, "-")[1]
	}
	return clickhouse.FeedItemEventRow{EventID: e.EventID, FeedID: e.FeedID, IID: e.IID, GUID: e.GUID, Kind: e.Kind,
		At: time.UnixMilli(at), ContentHash: e.Hash, Subscribable: e.Subscribable, Within: e.Within, TraceID: traceID}, nil
}

// HistoryEvents decodes the history events of a batch of messages (for
// tests and tools reading the stream without ClickHouse).
func HistoryEvents(msgs []*stream.Message) []ItemEvent {
	out := make([]ItemEvent, 0, len(msgs))
	for _, m := range msgs {
		var e ItemEvent
		if json.Unmarshal(m.Payload, &e) == nil {
			out = append(out, e)
		}
	}
	return out
}
