// Package history records what the notifier did with every notification:
// recent history in Redis, and every record on notify.history (TypeRecords
// arrays; the stage still reads old TypeRecord messages) for ClickHouse.
//
//	ds:{notifier}:history:sub:<subscriber id>  list: the newest records as JSON, newest first,
//	    at most Config.Recent, expiring Config.TTL after the last one
//	ds:{notifier}:history:n:<notification id>  string: the newest record of that notification, TTL Config.TTL
package history

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	gojson "github.com/goccy/go-json"
	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/internal/bounds"
	"github.com/dropstream/dropstream/internal/rediskey"
	"github.com/dropstream/dropstream/internal/settings"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer/sink"
)

// Statuses of a record.
const (
	// StatusSent: the channel accepted it.
	StatusSent = "sent"
	// StatusFailed: a send failed and will be retried.
	StatusFailed = "failed"
	// StatusRejected: refused or out of retries; dead-lettered.
	StatusRejected = "rejected"
	// StatusHeld: held during quiet hours; sent in the digest at their end.
	StatusHeld = "held"
	// StatusBatched: added to a digest window.
	StatusBatched = "batched"
	// StatusSuppressed: dropped by preferences or an inactive destination.
	StatusSuppressed = "suppressed"
)

// Stream message types on notify.history.
const (
	// TypeRecord is a message holding one record (JSON).
	TypeRecord = "notifier.history"
	// TypeRecords holds a JSON array of 1..MaxRecordsPerMessage records.
	TypeRecords = "notifier.history.batch"
)

// Bounds of a TypeRecords message.
const (
	MaxRecordsPerMessage = 256
	MaxMessageBytes      = 1 << 20
)

// maxRecordBytes bounds a TypeRecord message.
const maxRecordBytes = 16 << 10

// Topic returns the history topic, notify.history.
func Topic(partitions int) stream.Topic { return stream.NewTopic("notify", "history", partitions) }

// Record is one thing that happened to a notification for a destination;
// ID is the notification's id, shared by all its records.
type Record struct {
	ID            string    `json:"id"`
	Flow          string    `json:"flow"`
	Event         string    `json:"event"`
	SubscriberID  string    `json:"subscriber_id"`
	DestinationID string    `json:"destination_id,omitempty"`
	Channel       string    `json:"channel"`
	Subject       string    `json:"subject"`
	Window        string    `json:"window"`
	Status        string    `json:"status"`
	Attempts      int       `json:"attempts"`
	Critical      bool      `json:"critical,omitempty"`
	ObservedAt    time.Time `json:"observed_at,omitzero"`
	At            time.Time `json:"at"`
	// LatencyMs is from ObservedAt to At, for sends; 0 when unknown.
	LatencyMs int64 `json:"latency_ms"`
	// TraceID is the trace of the request's producer.
	TraceID string `json:"trace_id,omitempty"`
	// EventID and RunID name the cause: the transition and the run.
	EventID string `json:"event_id,omitempty"`
	RunID   string `json:"run_id,omitempty"`
	// MessageID is the stream message that carried the request.
	MessageID string `json:"message_id,omitempty"`
	Error     string `json:"error,omitempty"`
}

// Config configures a Recorder. Zero fields take their defaults.
type Config struct {
	// Recent is how many records are kept per subscriber. Default 200.
	Recent int `default:"200" range:"1..10000"`
	// TTL is how long recent records are kept. Default 7 days.
	TTL time.Duration `default:"168h" range:"1m.."`
	// Partitions of the history topic; 0 publishes nothing.
	Partitions int
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	settings.Defaults(&c)
	return c
}

// Validate reports every invalid field of a defaulted config.
func (c Config) Validate() error {
	errs := []error{settings.Check("history", &c)}
	errs = bounds.Check(errs, "history: partitions", c.Partitions, 0, stream.MaxPartitions)
	return errors.Join(errs...)
}

// Recorder writes records to Redis and the history stream; concurrency-safe.
type Recorder struct {
	rdb   redis.UniversalClient
	pub   *stream.Publisher
	topic stream.Topic
	cfg   Config
	ttlMs any // cfg.TTL in milliseconds, boxed once
	last  any // cfg.Recent-1, boxed once
}

// NewRecorder returns a recorder; nil pub or 0 partitions: Redis only.
func NewRecorder(rdb redis.UniversalClient, pub *stream.Publisher, cfg Config) (*Recorder, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Recorder{rdb: rdb, pub: pub, topic: Topic(max(cfg.Partitions, 1)), cfg: cfg, ttlMs: cfg.TTL.Milliseconds(), last: cfg.Recent - 1}, nil
}

// tag is the hash tag of the history's keys, the notifier's.
var tag = rediskey.Tag("notifier")

func subscriberKey(id string) string   { return rediskey.Key(tag, "history", "sub", id) }
func notificationKey(id string) string { return rediskey.Key(tag, "history", "n", id) }

// Record writes recs in one Redis pipeline and one publish; a subscriber's
// records go in one LPUSH, so they stand newest first.
func (r *Recorder) Record(ctx context.Context, recs ...Record) error {
	if len(recs) == 0 {
		return nil
	}
	pipe := r.rdb.Pipeline()
	msgs, err := r.queue(ctx, pipe, recs)
	if err != nil {
		return err
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("history: record: %w", err)
	}
	if len(msgs) == 0 {
		return nil
	}
	return r.pub.Publish(ctx, r.topic, msgs...)
}

// Queue adds the writes of recs (stream appends included) to pipe, so a
// caller writes a send and its history together.
func (r *Recorder) Queue(ctx context.Context, pipe redis.Pipeliner, recs ...Record) error {
	msgs, err := r.queue(ctx, pipe, recs)
	if err == nil && len(msgs) > 0 {
		r.pub.Queue(ctx, pipe, r.topic, msgs...)
	}
	return err
}

// queue adds recs' Redis writes to pipe and returns their stream messages.
// The commands' arguments share one array.
func (r *Recorder) queue(ctx context.Context, pipe redis.Pipeliner, recs []Record) ([]*stream.Message, error) {
	bodies := make([]any, len(recs))
	sub := make([]int, len(recs)) // index in subs of each record's subscriber
	var subs []any                // their keys, boxed once for the three commands
	at := make(map[string]int, len(recs))
	args := make([]any, 0, 15*len(recs))
	var batch batcher
	for i := range recs {
		rec := &recs[i]
		body, err := gojson.Marshal(rec) // encoding/json's bytes, faster
		if err != nil {
			return nil, fmt.Errorf("history: encode: %w", err)
		}
		bodies[i] = body // boxed once for both commands
		k, ok := at[rec.SubscriberID]
		if !ok {
			k = len(subs)
			at[rec.SubscriberID] = k
			subs = append(subs, subscriberKey(rec.SubscriberID))
		}
		sub[i] = k
		n := len(args)
		args = append(args, "set", notificationKey(rec.ID), bodies[i], "px", r.ttlMs)
		pipe.Process(ctx, redis.NewStatusCmd(ctx, args[n:len(args):len(args)]...))
		batch.add(rec.ID, body)
	}
	for k, key := range subs {
		n := len(args)
		args = append(args, "lpush", key)
		for i := range recs {
			if sub[i] == k {
				args = append(args, bodies[i])
			}
		}
		pipe.Process(ctx, redis.NewIntCmd(ctx, args[n:len(args):len(args)]...))
		n = len(args)
		args = append(args, "ltrim", key, 0, r.last, "pexpire", key, r.ttlMs)
		pipe.Process(ctx, redis.NewStatusCmd(ctx, args[n:n+4:n+4]...))
		pipe.Process(ctx, redis.NewBoolCmd(ctx, args[n+4:len(args):len(args)]...))
	}
	if r.pub == nil || r.cfg.Partitions == 0 {
		return nil, nil
	}
	batch.flush()
	return batch.msgs, nil
}

// batcher packs encoded records into TypeRecords messages.
type batcher struct {
	msgs []*stream.Message
	key  string // the current message's key: its first record's id
	buf  []byte // the current message's array, unterminated
	n    int    // records in buf
}

func (b *batcher) add(id string, body []byte) {
	if b.n == MaxRecordsPerMessage || len(b.buf)+len(body)+2 > MaxMessageBytes {
		b.flush()
	}
	if b.n == 0 {
		b.key, b.buf = id, []byte{'['} // a new array: the last one is a message's payload
	} else {
		b.buf = append(b.buf, ',')
	}
	b.buf = append(b.buf, body...)
	b.n++
}

func (b *batcher) flush() {
	if b.n > 0 {
		b.msgs = append(b.msgs, stream.NewMessage(b.key, TypeRecords, append(b.buf, ']')))
	}
	b.n = 0
}

// ErrNotFound: no recent record has the id.
var ErrNotFound = errors.New("history: notification not found")

// Recent returns up to limit newest records of a subscriber, newest first.
func (r *Recorder) Recent(ctx context.Context, subscriberID string, limit int) ([]Record, error) {
	limit = min(max(limit, 1), r.cfg.Recent)
	vals, err := r.rdb.LRange(ctx, subscriberKey(subscriberID), 0, int64(limit-1)).Result()
	if err != nil {
		return nil, fmt.Errorf("history: recent of %s: %w", subscriberID, err)
	}
	out := make([]Record, 0, len(vals))
	for _, v := range vals {
		var rec Record
		if json.Unmarshal([]byte(v), &rec) == nil {
			out = append(out, rec)
		}
	}
	return out, nil
}

// Get returns a notification's newest record; errors wrap ErrNotFound.
func (r *Recorder) Get(ctx context.Context, id string) (Record, error) {
	if id == "" || len(id) > 64 {
		return Record{}, ErrNotFound
	}
	raw, err := r.rdb.Get(ctx, notificationKey(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return Record{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return Record{}, fmt.Errorf("history: get %s: %w", id, err)
	}
	var rec Record
	if err := json.Unmarshal(raw, &rec); err != nil {
		return Record{}, fmt.Errorf("history: decode %s: %w", id, err)
	}
	return rec, nil
}

// StageName is the ClickHouse history writer's stage name and group.
const StageName = "notifier-history"

// AppendConfig is the "notifier-history" stage: it appends every message's
// records to ClickHouse's notifications table in batches. A ClickHouse
// failure keeps the batch pending; an undecodable message is dead-lettered.
func AppendConfig(partitions int, runner stream.RunnerConfig) sink.HistoryConfig[clickhouse.NotificationRow] {
	return sink.HistoryConfig[clickhouse.NotificationRow]{Stage: StageName, Topic: Topic(partitions),
		Tables: []string{clickhouse.TableNotifications}, Rows: decode, Insert: clickhouse.InsertNotifications, Runner: runner}
}

// Records returns the records of history message id of type typ.
func Records(id, typ string, payload []byte) ([]Record, error) {
	var recs []Record
	switch {
	case typ == TypeRecord && len(payload) <= maxRecordBytes:
		recs = make([]Record, 1)
		if err := json.Unmarshal(payload, &recs[0]); err != nil {
			return nil, fmt.Errorf("history: decode %s: %w", id, err)
		}
	case typ == TypeRecords && len(payload) <= MaxMessageBytes:
		if err := json.Unmarshal(payload, &recs); err != nil {
			return nil, fmt.Errorf("history: decode %s: %w", id, err)
		}
		if len(recs) == 0 || len(recs) > MaxRecordsPerMessage {
			return nil, fmt.Errorf("history: message %s holds %d records, want 1..%d", id, len(recs), MaxRecordsPerMessage)
		}
	default:
		return nil, fmt.Errorf("history: message %s: type %q or %d bytes", id, typ, len(payload))
	}
	return recs, nil
}

// decode returns the rows of a history message.
func decode(m *stream.Message) ([]clickhouse.NotificationRow, error) {
	recs, err := Records(m.ID, m.Type, m.Payload)
	if err != nil {
		return nil, err
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
