package feed

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/clickhouse/clickhousetest"
	"github.com/dropstream/dropstream/flows/feed/feedsim"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer/sink"
)

func TestHistory_writesItemHistoryToClickHouseOnce(t *testing.T) {
	ch, err := clickhouse.Open(t.Context(), clickhouse.Config{DSN: testenv.ClickHouseDSN(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ch.Close() })
	if _, err := clickhouse.Migrate(t.Context(), ch, nil); err != nil {
		t.Fatal(err)
	}
	sim := feedsim.New(feedsim.RSS, item("1", "one"), item("2", "two"))
	h := newHarness(t, testenv.Backends()[1], sim, Feed{AwaitStabilizationMinutes: 5, MaxDelayMinutes: 60, IncludeExisting: true})
	h.subscribe("each", Manager{Kind: EachItem})
	h.pollAt(t0)
	sim.Set(item("1", "one, edited"), item("2", "two"))
	h.pollAt(t0.Add(time.Minute))
	h.pollAt(t0.Add(10 * time.Minute))

	cfg := h.flow.HistoryConfig()
	cfg.FlushInterval, cfg.Runner = 20*time.Millisecond, stream.RunnerConfig{Block: 20 * time.Millisecond}
	hist, err := sink.NewHistory(ch, cfg, stream.Telemetry{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hist.Close() }()
	r, err := stream.NewRunner(h.rdb, hist.Stage(), stream.Telemetry{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()

	want := map[string]uint64{EventFirstSeen: 2, EventEdited: 1, EventAssigned: 2, EventDelivered: 2, EventCleared: 2}
	var got map[string]uint64
	testenv.WaitFor(t, waitTimeout, func() bool {
		got, err = clickhousetest.FeedItemEventCounts(t.Context(), ch, h.feed.ID)
		return err == nil && reflect.DeepEqual(got, want)
	}, "feed_item_events never matched")
	testenv.WaitFor(t, waitTimeout, func() bool { return stream.Drained(ctx, h.rdb, h.flow.topics.History, StageHistory) })
	// A replay of the whole history stream collapses into the same events.
	var rows []clickhouse.FeedItemEventRow
	for p := 0; p < h.flow.topics.History.Partitions; p++ {
		entries, err := h.rdb.XRange(ctx, h.flow.topics.History.Stream(p), "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			payload, _ := e.Values["payload"].(string)
			row, err := historyRows(&stream.Message{Type: TypeItemEvent, Payload: []byte(payload)})
			if err != nil {
				t.Fatal(err)
			}
			rows = append(rows, row...)
		}
	}
	if err := clickhouse.InsertFeedItemEvents(t.Context(), ch, rows); err != nil {
		t.Fatal(err)
	}
	if got, err = clickhousetest.FeedItemEventCounts(t.Context(), ch, h.feed.ID); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("after a replay: %v %v, want %v", got, err, want)
	}
}
