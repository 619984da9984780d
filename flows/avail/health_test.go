package avail

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/clickhouse/clickhousetest"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer/sink"
)

// The health history keeps each source health transition once, with the
// blind period on the way up, and nothing of the other transitions.
func TestHealthHistory_BlindPeriodsReachClickHouseOnce(t *testing.T) {
	ctx := t.Context()
	ch := clickhousetest.Open(t)
	rdb := testenv.Dial(t, testenv.RedisURL(t))
	topics := NewTopics(2)
	src := fmt.Sprintf("blind-%d", time.Now().UnixNano())
	key := avail.SourceKey(src)
	lastGood := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	down := avail.Transition{EventID: avail.EventID("r1", key, avail.KindClose, true), ScopeKey: key, SourceID: src, Kind: avail.KindClose,
		Stable: true, Notify: true, RunID: "r1", RunAt: lastGood.Add(3 * time.Minute), LastSeen: lastGood,
		Entity: avail.Entity{Key: key, Kind: avail.EntitySource, Provider: "resy", Venue: src, Attrs: map[string]string{"consecutive_failures": "3", "error": "HTTP 500"}}}
	up := avail.Transition{EventID: avail.EventID("r2", key, avail.KindOpen, true), ScopeKey: key, SourceID: src, Kind: avail.KindOpen,
		Stable: true, Notify: true, RunID: "r2", RunAt: lastGood.Add(42 * time.Minute),
		Entity: avail.Entity{Key: key, Kind: avail.EntitySource, Provider: "resy", Venue: src,
			Attrs: map[string]string{"consecutive_failures": "0", "blind_since": lastGood.Format(time.RFC3339Nano)}}}
	e := avail.Entity{Key: avail.SlotKey("resy", "v1", "2026-03-02", "19:00", 2), Kind: avail.EntitySlot, Provider: "resy", Venue: "v1"}
	slotOpen := avail.Transition{EventID: avail.EventID("r3", e.Key, avail.KindOpen, true), Entity: e, ScopeKey: "s|v1", SourceID: src,
		Kind: avail.KindOpen, Stable: true, Notify: true, RunID: "r3", RunAt: lastGood.Add(43 * time.Minute)}
	pub := stream.NewPublisher(rdb, stream.Telemetry{})
	for _, tr := range []avail.Transition{down, up, slotOpen, down} { // the down twice: a redelivery
		body, _ := json.Marshal(tr)
		if err := pub.Publish(ctx, topics.Transitions, stream.NewMessage(tr.ScopeKey, avail.TypeTransition, body)); err != nil {
			t.Fatal(err)
		}
	}
	cfg := HealthHistoryConfig(topics)
	cfg.FlushInterval, cfg.Runner = 20*time.Millisecond, stream.RunnerConfig{Block: 20 * time.Millisecond}
	hist, err := sink.NewHistory(ch, cfg, stream.Telemetry{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hist.Close() }()
	r, err := stream.NewRunner(rdb, hist.Stage(), stream.Telemetry{})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.Run(rctx) })
	defer func() { cancel(); wg.Wait() }()

	type row struct {
		status, errText string
		failures, blind uint32
		since           time.Time
	}
	var got []row
	testenv.WaitFor(t, 30*time.Second, func() bool {
		rows, err := ch.Conn().Query(ctx, "SELECT status, error, consecutive_failures, blind_for_seconds, blind_since FROM source_health FINAL WHERE source_id = ? ORDER BY at", src)
		if err != nil {
			return false
		}
		defer rows.Close()
		got = got[:0]
		for rows.Next() {
			var r row
			if rows.Scan(&r.status, &r.errText, &r.failures, &r.blind, &r.since) == nil {
				got = append(got, r)
			}
		}
		return len(got) == 2
	}, "two health rows")
	if d := got[0]; d.status != "down" || d.failures != 3 || d.errText != "HTTP 500" || !d.since.Equal(lastGood) || d.blind != 0 {
		t.Errorf("down row %+v", d)
	}
	if u := got[1]; u.status != "up" || u.blind != 42*60 || !u.since.Equal(lastGood) {
		t.Errorf("up row %+v, want blind for 2520 s since %s", u, lastGood)
	}
}
