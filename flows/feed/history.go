package feed

import (
	"strconv"
	"time"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer/sink"
)

// HistoryConfig configures the "feed-history" stage: feed.history events
// become feed_item_events rows, collapsed by event id.
func (f *Flow) HistoryConfig() sink.HistoryConfig[clickhouse.FeedItemEventRow] {
	return sink.HistoryConfig[clickhouse.FeedItemEventRow]{Stage: StageHistory, Topic: f.topics.History,
		Tables: []string{clickhouse.TableFeedItemEvents},
		Rows:   historyRows, Insert: clickhouse.InsertFeedItemEvents}
}

// historyRows decodes a history event into its row.
func historyRows(m *stream.Message) ([]clickhouse.FeedItemEventRow, error) {
	e, err := decode[ItemEvent](m, TypeItemEvent)
	if err != nil {
		return nil, err
	}
	at, err := strconv.ParseInt(e.AtMs, 10, 64)
	if err != nil || e.EventID == "" || len(e.EventID) > 512 || len(e.GUID) > 2048 {
		return nil, stream.Permanentf("feed: history event %q malformed", clip(e.EventID, 64))
	}
	return []clickhouse.FeedItemEventRow{{EventID: e.EventID, FeedID: e.FeedID, IID: e.IID, GUID: e.GUID, Kind: e.Kind,
		At: time.UnixMilli(at), ContentHash: e.Hash, Subscribable: e.Subscribable, Within: e.Within, TraceID: flow.TraceIDOf(m.TraceParent)}}, nil
}
