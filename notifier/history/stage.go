package history

import (
	"encoding/json"
	"fmt"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer/sink"
)

// StageName is the ClickHouse history writer's stage name and group.
const StageName = "notifier-history"

// AppendConfig is the "notifier-history" stage: it appends every message's
// records to ClickHouse's notifications table in batches. A ClickHouse
// failure keeps the batch pending; an undecodable message is dead-lettered.
func AppendConfig(partitions int, runner stream.RunnerConfig) sink.HistoryConfig[clickhouse.NotificationRow] {
	return sink.HistoryConfig[clickhouse.NotificationRow]{Stage: StageName, Topic: Topic(partitions),
		Tables: []string{clickhouse.TableNotifications}, Rows: decode, Insert: clickhouse.InsertNotifications, Runner: runner}
}

// decode returns the rows of a history message.
func decode(m *stream.Message) ([]clickhouse.NotificationRow, error) {
	var recs []Record
	switch {
	case m.Type == TypeRecord && len(m.Payload) <= maxRecordBytes:
		recs = make([]Record, 1)
		if err := json.Unmarshal(m.Payload, &recs[0]); err != nil {
			return nil, fmt.Errorf("history: decode %s: %w", m.ID, err)
		}
	case m.Type == TypeRecords && len(m.Payload) <= MaxMessageBytes:
		if err := json.Unmarshal(m.Payload, &recs); err != nil {
			return nil, fmt.Errorf("history: decode %s: %w", m.ID, err)
		}
		if len(recs) == 0 || len(recs) > MaxRecordsPerMessage {
			return nil, fmt.Errorf("history: message %s holds %d records, want 1..%d", m.ID, len(recs), MaxRecordsPerMessage)
		}
	default:
		return nil, fmt.Errorf("history: message %s: type %q or %d bytes", m.ID, m.Type, len(m.Payload))
	}
	rows := make([]clickhouse.NotificationRow, len(recs))
	for i, r := range recs {
		if r.ID == "" {
			return nil, fmt.Errorf("history: message %s: record %d has no id", m.ID, i)
		}
		rows[i] = clickhouse.NotificationRow{NotificationID: r.ID, Flow: r.Flow, Event: r.Event, SubscriberID: r.SubscriberID,
			DestinationID: r.DestinationID, Channel: r.Channel, Subject: r.Subject, Window: r.Window, Status: r.Status,
			Attempts: uint16(min(max(r.Attempts, 0), 65535)), Critical: r.Critical, ObservedAt: r.ObservedAt, RecordedAt: r.At,
			LatencyMs: uint64(max(r.LatencyMs, 0)), TraceID: r.TraceID, EventID: r.EventID, RunID: r.RunID, MessageID: r.MessageID,
			Error: r.Error}
	}
	return rows, nil
}
