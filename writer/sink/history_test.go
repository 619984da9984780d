package sink_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer/sink"
)

const historyPartitions = 4

// itemEvent is what the tests' history topic carries: a feed item event,
// written to the project's feed_item_events table (a ReplacingMergeTree
// keyed by event id, so a redelivered event collapses).
type itemEvent struct {
	EventID string `json:"event_id"`
	FeedID  string `json:"feed_id"`
	Kind    string `json:"kind"`
	AtMs    int64  `json:"at_ms"`
}

func itemEventRows(m *stream.Message) ([]clickhouse.FeedItemEventRow, error) {
	var e itemEvent
	if err := json.Unmarshal(m.Payload, &e); err != nil || e.EventID == "" {
		return nil, fmt.Errorf("item event %s malformed (%v)", m.ID, err)
	}
	return []clickhouse.FeedItemEventRow{{EventID: e.EventID, FeedID: e.FeedID, IID: "i-" + e.EventID, Kind: e.Kind,
		At: time.UnixMilli(e.AtMs)}}, nil
}

// historyConfig is a history of feed item events over topic, counting
// its inserts.
func historyConfig(topic stream.Topic, inserts *atomic.Int64) sink.HistoryConfig[clickhouse.FeedItemEventRow] {
	return sink.HistoryConfig[clickhouse.FeedItemEventRow]{
		Stage: "test-history", Topic: topic, Tables: []string{clickhouse.TableFeedItemEvents},
		Rows: itemEventRows,
		Insert: func(ctx context.Context, ch *clickhouse.Client, rows []clickhouse.FeedItemEventRow) error {
			inserts.Add(1)
			return clickhouse.InsertFeedItemEvents(ctx, ch, rows)
		},
	}
}

func newHistory(t *testing.T, ch *clickhouse.Client, cfg sink.HistoryConfig[clickhouse.FeedItemEventRow]) *sink.History[clickhouse.FeedItemEventRow] {
	t.Helper()
	h, err := sink.NewHistory(ch, cfg, stream.Telemetry{Logger: quiet})
	if err != nil {
		t.Fatalf("NewHistory: %v", err)
	}
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return h
}

// publishEvents publishes n events of feed (event ids "<feed>-<i>") and
// the malformed payloads bad, keyed to spread over the partitions.
func publishEvents(t *testing.T, rdb redis.UniversalClient, topic stream.Topic, feed string, n int, bad ...string) {
	t.Helper()
	var msgs []*stream.Message
	for i := range n {
		body, _ := json.Marshal(itemEvent{EventID: fmt.Sprintf("%s-%d", feed, i), FeedID: feed, Kind: "first_seen", AtMs: 1_700_000_000_000 + int64(i)})
		msgs = append(msgs, stream.NewMessage(fmt.Sprint("k", i), "test.event", body))
	}
	for i, b := range bad {
		msgs = append(msgs, stream.NewMessage(fmt.Sprint("bad", i), "test.event", []byte(b)))
	}
	if err := stream.NewPublisher(rdb, stream.Telemetry{}).Publish(t.Context(), topic, msgs...); err != nil {
		t.Fatalf("publish: %v", err)
	}
}

// eventCounts returns the rows of feed in feed_item_events once duplicates
// collapse (FINAL), and its distinct event ids.
func eventCounts(t *testing.T, ch *clickhouse.Client, feed string) (final, distinct uint64) {
	t.Helper()
	if err := ch.Conn().QueryRow(t.Context(), "SELECT count(), uniqExact(event_id) FROM "+clickhouse.TableFeedItemEvents+
		" FINAL WHERE feed_id = ?", feed).Scan(&final, &distinct); err != nil {
		t.Fatalf("count: %v", err)
	}
	return final, distinct
}

func TestHistory_appendsEveryMessageOnceAndDeadLettersABadOne(t *testing.T) {
	ch := testenv.ClickHouse(t)
	rdb := testenv.Dial(t, testenv.RedisURL(t))
	topic := stream.NewTopic("test", "history-once", historyPartitions)
	var inserts atomic.Int64
	cfg := historyConfig(topic, &inserts)
	cfg.FlushInterval = 50 * time.Millisecond
	cfg.Runner = stream.RunnerConfig{Block: 50 * time.Millisecond}
	h := newHistory(t, ch, cfg)
	const n = 40
	publishEvents(t, rdb, topic, "feed-once", n, `{"event_id":`)
	runStages(t, rdb, h.Stages()...)
	testenv.WaitFor(t, 30*time.Second, func() bool {
		s := stateOf(t, rdb, topic, cfg.Stage)
		final, _ := eventCounts(t, ch, "feed-once")
		return final == n && s.Read == n+1 && s.Pending == 0 && s.Dead == 1
	}, "every good event in ClickHouse, the bad one dead-lettered")
	dead, err := stream.NewDeadLetters(rdb).List(t.Context(), topic, 10)
	if err != nil || len(dead) != 1 {
		t.Fatalf("dead letters %+v, %v; want one", dead, err)
	}
	if !strings.Contains(dead[0].Reason, "malformed") || dead[0].Stage != cfg.Stage {
		t.Errorf("dead letter reason %q of stage %q, want Rows' error from %s", dead[0].Reason, dead[0].Stage, cfg.Stage)
	}

	// A redelivery of every message (a copy that died before its
	// acknowledgement) inserts the rows again: they collapse.
	var msgs []*stream.Message
	for p := range historyPartitions {
		xs, err := rdb.XRange(t.Context(), topic.Stream(p), "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range xs {
			payload, _ := x.Values["payload"].(string)
			msgs = append(msgs, &stream.Message{ID: x.ID, Stream: topic.Stream(p), Partition: p, Attempt: 2, Payload: []byte(payload)})
		}
	}
	before := inserts.Load()
	var be *stream.BatchError
	err = h.Handle(t.Context(), msgs)
	if !errors.As(err, &be) || len(be.Errs) != n+1 {
		t.Fatalf("Handle of the redelivered batch = %v, want a *stream.BatchError", err)
	}
	for i, e := range be.Errs {
		if bad := string(msgs[i].Payload) == `{"event_id":`; bad != (e != nil) || bad && !stream.IsPermanent(e) {
			t.Errorf("message %d (%s): %v, want a permanent error for the bad message only", i, msgs[i].Payload, e)
		}
	}
	if inserts.Load() != before+1 {
		t.Errorf("%d inserts for the redelivered batch, want 1", inserts.Load()-before)
	}
	if final, distinct := eventCounts(t, ch, "feed-once"); final != n || distinct != n {
		t.Errorf("after the redelivery: %d rows, %d distinct events; want %d each", final, distinct, n)
	}
}

func TestHistory_copiesShareOneBatcher(t *testing.T) {
	ch := testenv.ClickHouse(t)
	rdb := testenv.Dial(t, testenv.RedisURL(t))
	topic := stream.NewTopic("test", "history-copies", historyPartitions)
	var inserts atomic.Int64
	cfg := historyConfig(topic, &inserts)
	cfg.FlushInterval, cfg.Linger, cfg.ReadAhead = time.Second, -1, 2
	cfg.Runner = stream.RunnerConfig{Block: 50 * time.Millisecond, BatchSize: 5}
	h := newHistory(t, ch, cfg)
	const n = 60 // 4 partitions × 15: every copy reads batches of 5
	publishEvents(t, rdb, topic, "feed-copies", n)
	// The read-ahead copies and two more copies of the stage, as
	// `run --copies 2` would start.
	runStages(t, rdb, append(h.Stages(), h.Stage(), h.Stage())...)
	testenv.WaitFor(t, 30*time.Second, func() bool {
		s := stateOf(t, rdb, topic, cfg.Stage)
		final, _ := eventCounts(t, ch, "feed-copies")
		return final == n && s.Pending == 0 && s.Read == n
	}, "every event in ClickHouse")
	// The batches of every copy and partition queued within a flush
	// interval go into one insert; 60 messages in batches of 5 are at
	// least 3 reads per copy, so separate batchers would insert more.
	if got := inserts.Load(); got > 2 {
		t.Errorf("%d inserts, want the copies' batches merged into 1 (2 at most when a read straddles a flush)", got)
	}
}

func TestHistory_clickHouseOutageBecomesABacklog(t *testing.T) {
	dsn := testenv.ClickHouseDSN(t)
	direct := testenv.OpenClickHouse(t, dsn)
	u, _ := url.Parse(dsn)
	proxy := testenv.StartProxy(t, u.Host)
	ch := testenv.DialClickHouse(t, dsn, proxy.Addr())
	rdb := testenv.Dial(t, testenv.RedisURL(t))
	topic := stream.NewTopic("test", "history-outage", historyPartitions)
	var inserts atomic.Int64
	cfg := historyConfig(topic, &inserts)
	cfg.FlushInterval, cfg.FlushTimeout, cfg.MaxBackoff = 50*time.Millisecond, 500*time.Millisecond, 100*time.Millisecond
	cfg.Runner = stream.RunnerConfig{Block: 50 * time.Millisecond, BatchSize: 2, HandlerTimeout: 700 * time.Millisecond,
		ClaimIdle: time.Second, ClaimInterval: 100 * time.Millisecond}
	h := newHistory(t, ch, cfg)
	proxy.Stop() // ClickHouse refuses connections from now on
	runStages(t, rdb, h.Stages()...)
	const n = 12
	publishEvents(t, rdb, topic, "feed-outage", n)

	// The batches read are held in hand while ClickHouse refuses them
	// (pending, none acknowledged); the rest wait in the stream.
	testenv.WaitFor(t, 30*time.Second, func() bool {
		s := stateOf(t, rdb, topic, cfg.Stage)
		return s.Pending > 0 && s.Read == s.Pending
	}, "batches read and held pending")
	if s := stateOf(t, rdb, topic, cfg.Stage); s.Read-s.Pending != 0 || s.Dead != 0 {
		t.Fatalf("during the outage %d messages were acknowledged and %d dead-lettered, want none (%+v)", s.Read-s.Pending, s.Dead, s)
	}
	if final, _ := eventCounts(t, direct, "feed-outage"); final != 0 {
		t.Fatalf("ClickHouse holds %d rows during the outage", final)
	}

	proxy.Start(t) // ClickHouse is back: the backlog drains
	testenv.WaitFor(t, 60*time.Second, func() bool {
		s := stateOf(t, rdb, topic, cfg.Stage)
		final, _ := eventCounts(t, direct, "feed-outage")
		return final == n && s.Pending == 0 && s.Lag == 0
	}, "the backlog drained into ClickHouse")
	if final, distinct := eventCounts(t, direct, "feed-outage"); final != n || distinct != n {
		t.Errorf("%d rows, %d distinct events; want %d each", final, distinct, n)
	}
	if s := stateOf(t, rdb, topic, cfg.Stage); s.Dead != 0 {
		t.Errorf("%d messages dead-lettered", s.Dead)
	}
}

func TestHistoryConfig_validate(t *testing.T) {
	topic := stream.NewTopic("test", "history", 2)
	var inserts atomic.Int64
	good := historyConfig(topic, &inserts)
	if err := good.WithDefaults().Validate(); err != nil {
		t.Fatalf("a complete config: %v", err)
	}
	d := good.WithDefaults()
	if d.BatchRows != 100_000 || d.FlushInterval != time.Second || d.ReadAhead != 1 ||
		d.Runner.BatchSize != sink.DefaultHistoryBatchSize || !d.Runner.Retry.Disabled {
		t.Errorf("defaults %+v", d)
	}
	for name, mutate := range map[string]func(*sink.HistoryConfig[clickhouse.FeedItemEventRow]){
		"no stage":       func(c *sink.HistoryConfig[clickhouse.FeedItemEventRow]) { c.Stage = "" },
		"no tables":      func(c *sink.HistoryConfig[clickhouse.FeedItemEventRow]) { c.Tables = nil },
		"no rows":        func(c *sink.HistoryConfig[clickhouse.FeedItemEventRow]) { c.Rows = nil },
		"no insert":      func(c *sink.HistoryConfig[clickhouse.FeedItemEventRow]) { c.Insert = nil },
		"no topic":       func(c *sink.HistoryConfig[clickhouse.FeedItemEventRow]) { c.Topic = stream.Topic{} },
		"short timeout":  func(c *sink.HistoryConfig[clickhouse.FeedItemEventRow]) { c.Runner.HandlerTimeout = time.Second },
		"read ahead":     func(c *sink.HistoryConfig[clickhouse.FeedItemEventRow]) { c.ReadAhead = sink.MaxReadAhead + 1 },
		"linger too big": func(c *sink.HistoryConfig[clickhouse.FeedItemEventRow]) { c.Linger = time.Minute },
	} {
		c := good
		mutate(&c)
		if err := c.WithDefaults().Validate(); err == nil {
			t.Errorf("%s: Validate = nil, want an error", name)
		}
		if _, err := sink.NewHistory(nil, c, stream.Telemetry{}); err == nil {
			t.Errorf("%s: NewHistory = nil error", name)
		}
	}
}
