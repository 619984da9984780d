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

// maxRecordBytes bounds a history message.
const maxRecordBytes = 16 << 10

// Stage returns the "notifier-history" stage: its own consumer group on
// the history topic, appending each read batch to ClickHouse's
// notifications table in one INSERT. A ClickHouse failure fails the batch
// retryably (the backlog waits in the stream); undecodable records are
// dead-lettered.
func Stage(ch *clickhouse.Client, partitions int, runner stream.RunnerConfig) (stream.Stage, error) {
	if ch == nil {
		return stream.Stage{}, errors.New("history: stage needs ClickHouse")
	}
	h := func(ctx context.Context, msgs []*stream.Message) error {
		errs := make([]error, len(msgs))
		rows := make([]clickhouse.NotificationRow, 0, len(msgs))
		var idx []int
		for i, m := range msgs {
			row, err := decode(m)
			if err != nil {
				errs[i] = stream.Permanent(err)
				continue
			}
			rows = append(rows, row)
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

func decode(m *stream.Message) (clickhouse.NotificationRow, error) {
	if m.Type != TypeRecord || len(m.Payload) > maxRecordBytes {
		return clickhouse.NotificationRow{}, fmt.Errorf("history: message %s: type %q or %d bytes", m.ID, m.Type, len(m.Payload))
	}
	var r Record
	if err := json.Unmarshal(m.Payload, &r); err != nil || r.ID == "" {
		return clickhouse.NotificationRow{}, fmt.Errorf("history: decode %s: %v", m.ID, err)
	}
	return clickhouse.NotificationRow{NotificationID: r.ID, Flow: r.Flow, Event: r.Event, SubscriberID: r.SubscriberID,
		DestinationID: r.DestinationID, Channel: r.Channel, Subject: r.Subject, Window: r.Window, Status: r.Status,
		Attempts: uint16(min(max(r.Attempts, 0), 65535)), Critical: r.Critical, ObservedAt: r.ObservedAt, RecordedAt: r.At,
		LatencyMs: uint64(max(r.LatencyMs, 0)), TraceID: r.TraceID, EventID: r.EventID, RunID: r.RunID, MessageID: r.MessageID,
		Error: r.Error}, nil
}
