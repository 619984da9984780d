package history

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/stream"
)

// StageName is the ClickHouse history writer's stage name and group.
const StageName = "notifier-history"

// Stage returns the "notifier-history" stage: its own consumer group on
// the history topic, appending the records of each read batch of messages
// (TypeRecords or TypeRecord) to ClickHouse's notifications table in one
// INSERT. A ClickHouse failure fails the batch retryably (the backlog waits
// in the stream); a message that is not a bounded, decodable record or
// array of records is dead-lettered whole.
func Stage(ch *clickhouse.Client, partitions int, runner stream.RunnerConfig) (stream.Stage, error) {
	if ch == nil {
		return stream.Stage{}, errors.New("history: stage needs ClickHouse")
	}
	h := func(ctx context.Context, msgs []*stream.Message) error {
		errs := make([]error, len(msgs))
		rows := make([]clickhouse.NotificationRow, 0, len(msgs))
		var idx []int
		for i, m := range msgs {
			mrows, err := decode(m)
			if err != nil {
				errs[i] = stream.Permanent(err)
				continue
			}
			rows = append(rows, mrows...)
			idx = append(idx, i)
		}
		if err := clickhouse.InsertNotifications(ctx, ch, rows); err != nil {
			for _, i := range idx {
				errs[i] = err
			}
		}
		return &stream.BatchError{Errs: errs}
	}
	return stream.Stage{Name: StageName, Topic: Topic(partitions), BatchHandler: h, Config: runner}, nil
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
