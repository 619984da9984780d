package writer_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/clickhouse/clickhousetest"
	"github.com/dropstream/dropstream/internal/telemetrytest"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/stream/streamtest"
	"github.com/dropstream/dropstream/writer"
	"github.com/dropstream/dropstream/writer/sink"
)

const analyticsPartitions = 4

// history is what publishHistory published, counted once.
type history struct {
	transitions, runs uint64
	sessions          clickhousetest.SessionCounts
	published         int64 // stream entries, duplicates included
}

// scoped returns a transition of e whose run id belongs to e's scope.
func scoped(e avail.Entity, kind string, run int, stable bool) avail.Transition {
	tr := transition(e, kind, run, stable)
	tr.RunID = e.Venue + "-" + runID(run)
	tr.EventID = avail.EventID(tr.RunID, e.Key, kind, stable)
	return tr
}

// closing returns close tr of the session its entity opened in run open,
// as the diff sends raw closes.
func closing(tr avail.Transition, open int) avail.Transition {
	tr.OpenRunID, tr.OpenedAtMS = tr.Entity.Venue+"-"+runID(open), runAt(open).UnixMilli()
	return tr
}

// publishHistory publishes, for n entities (one scope each): a raw open in
// run 1 (without the Raw flag, as older producers send it), a stable open in
// run 2, a raw close in run 3 and a raw and stable open in run 5,
// then the first half of those messages again; and runs 1 to 5 of each scope
// plus a replay of run 1 (applied false).
func publishHistory(t *testing.T, rdb redis.UniversalClient, n int) history {
	t.Helper()
	topics := avail.NewTopics(analyticsPartitions)
	pub := stream.NewPublisher(rdb, stream.Telemetry{})
	var trs, runs []*stream.Message
	for i := range n {
		e := slot(fmt.Sprintf("a%03d", i))
		closeTr := closing(scoped(e, "close", 3, false), 1)
		closeTr.LastSeen = runAt(2)
		closeTr.Raw = true
		reopen := scoped(e, "open", 5, true) // raw and stable at once
		reopen.Raw = true
		for _, tr := range []avail.Transition{scoped(e, "open", 1, false), scoped(e, "open", 2, true), closeTr,
			reopen} {
			body, _ := json.Marshal(tr)
			trs = append(trs, stream.NewMessage(tr.ScopeKey, avail.TypeTransition, body))
		}
		for run := 1; run <= 6; run++ {
			r := avail.RunRecord{RunID: e.Venue + "-" + runID(min(run, 5)), SourceID: "src", Provider: "resy",
				ScopeKey: scopeKey(e.Venue), StartedAt: runAt(run).Add(-time.Second), RunAt: runAt(min(run, 5)),
				Status: avail.StatusOK, Observed: 1, Applied: run <= 5}
			if run == 6 { // the replay of run 5
				r.StartedAt = runAt(5).Add(-time.Second)
			}
			body, _ := json.Marshal(r)
			runs = append(runs, stream.NewMessage(r.ScopeKey, avail.TypeRun, body))
		}
	}
	trs = append(trs, trs[:len(trs)/2]...)
	if err := pub.Publish(t.Context(), topics.Transitions, trs...); err != nil {
		t.Fatalf("publish transitions: %v", err)
	}
	if err := pub.Publish(t.Context(), topics.Runs, runs...); err != nil {
		t.Fatalf("publish runs: %v", err)
	}
	return history{transitions: uint64(4 * n), runs: uint64(5 * n),
		sessions:  clickhousetest.SessionCounts{Total: uint64(2 * n), Open: uint64(n), Closed: uint64(n)},
		published: int64(len(trs) + len(runs))}
}

// counts reads the exact counts, or false when ClickHouse fails.
func counts(t *testing.T, ch *clickhouse.Client) (history, bool) {
	t.Helper()
	var h history
	var err error
	ctx := t.Context()
	if h.transitions, err = clickhouse.CountTransitions(ctx, ch, clickhouse.Filter{}); err != nil {
		return h, false
	}
	if h.runs, err = clickhouse.CountRuns(ctx, ch, clickhouse.Filter{}); err != nil {
		return h, false
	}
	if h.sessions, err = clickhousetest.CountSessions(ctx, ch); err != nil {
		return h, false
	}
	return h, true
}

func newAnalytics(t *testing.T, ch *clickhouse.Client, cfg writer.AnalyticsConfig, mp metric.MeterProvider) *writer.Analytics {
	t.Helper()
	a, err := writer.NewAnalytics(ch, cfg, stream.Telemetry{MeterProvider: mp, Logger: quiet})
	if err != nil {
		t.Fatalf("NewAnalytics: %v", err)
	}
	t.Cleanup(func() {
		if err := a.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return a
}

func TestAnalytics_writesExactlyOnceToClickHouse(t *testing.T) {
	dsn := testenv.ClickHouseDSN(t)
	ch := testenv.DialClickHouse(t, dsn, "")
	if _, err := clickhouse.Migrate(t.Context(), ch, nil); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	rdb := testenv.Dial(t, testenv.RedisURL(t))
	mp, collect := telemetrytest.Metrics(t)
	a := newAnalytics(t, ch, writer.AnalyticsConfig{Partitions: analyticsPartitions, Batching: sink.Batching{FlushInterval: 200 * time.Millisecond}, Runner: stream.RunnerConfig{Block: 50 * time.Millisecond}}, mp)
	runStages(t, rdb, append(a.Stages(), a.Stages()...)...) // two copies of each stage
	const n = 30
	want := publishHistory(t, rdb, n)
	topics := avail.NewTopics(analyticsPartitions)
	var last string
	defer func() {
		if t.Failed() {
			t.Logf("last seen: %s; want %+v", last, want)
		}
	}()
	testenv.WaitFor(t, 60*time.Second, func() bool {
		got, ok := counts(t, ch)
		tr := stateOf(t, rdb, topics.Transitions, writer.StageAnalyticsTransitions)
		rs := stateOf(t, rdb, topics.Runs, writer.StageAnalyticsRuns)
		last = fmt.Sprintf("counts %+v (ok %v), transitions group %+v, runs group %+v", got, ok, tr, rs)
		return ok && got.transitions == want.transitions && got.runs == want.runs && got.sessions == want.sessions &&
			tr.Read+rs.Read == want.published && tr.Pending+rs.Pending == 0
	}, "every row in ClickHouse and every message acknowledged")
	for _, s := range []streamtest.GroupState{stateOf(t, rdb, topics.Transitions, writer.StageAnalyticsTransitions),
		stateOf(t, rdb, topics.Runs, writer.StageAnalyticsRuns)} {
		if s.Dead != 0 {
			t.Fatalf("%d messages dead-lettered", s.Dead)
		}
	}

	e := slot("a007")
	sessions, err := clickhousetest.EntitySessions(t.Context(), ch, e.Key, 10)
	if err != nil || len(sessions) != 2 {
		t.Fatalf("EntitySessions = %+v, %v; want 2", sessions, err)
	}
	first, second := sessions[0], sessions[1]
	if !first.Closed || first.SessionID != avail.SessionID(e.Key, "a007-"+runID(1)) || first.Duration != 2*time.Minute ||
		!first.OpenedAt.Equal(runAt(1)) || !first.ClosedAt.Equal(runAt(3)) || first.CloseRunID != "a007-"+runID(3) ||
		first.VenueName != e.VenueName || first.TraceID == "" {
		t.Fatalf("first session = %+v, want closed after 2m", first)
	}
	if second.Closed || second.SessionID != avail.SessionID(e.Key, "a007-"+runID(5)) || !second.ClosedAt.IsZero() {
		t.Fatalf("second session = %+v, want open since run 5", second)
	}
	for _, c := range []struct {
		cond string
		want int
	}{{"raw = 1", 3 * n}, {"stable = 1", 2 * n}, {"raw = 1 AND stable = 1", n}} {
		var got uint64
		q := "SELECT count() FROM transitions FINAL WHERE " + c.cond
		if err := ch.Conn().QueryRow(t.Context(), q).Scan(&got); err != nil || got != uint64(c.want) {
			t.Fatalf("transitions with %s = %d, %v; want %d", c.cond, got, err, c.want)
		}
	}
	var applied uint8
	q := "SELECT applied FROM runs FINAL WHERE run_id = 'a007-" + runID(5) + "'"
	if err := ch.Conn().QueryRow(t.Context(), q).Scan(&applied); err != nil || applied != 1 {
		t.Fatalf("replayed run applied = %d, %v; want the applied row", applied, err)
	}
	checkAnalyticsMetrics(t, collect(), want)
}

func checkAnalyticsMetrics(t *testing.T, rm metricdata.ResourceMetrics, want history) {
	t.Helper()
	rows, ok := telemetrytest.Find(rm, sink.MetricRowsWritten)
	if !ok {
		t.Fatalf("no %s metric", sink.MetricRowsWritten)
	}
	byTable := map[string]int64{}
	for _, dp := range rows.Data.(metricdata.Sum[int64]).DataPoints {
		table, _ := dp.Attributes.Value("table")
		byTable[table.AsString()] += dp.Value
	}
	if byTable["transitions"] < int64(want.transitions) || byTable["runs"] < int64(want.runs) ||
		byTable["sessions"] < int64(want.sessions.Total+want.sessions.Closed) {
		t.Fatalf("rows written = %v, want at least %+v", byTable, want)
	}
	dur, ok := telemetrytest.Find(rm, sink.MetricFlushDuration)
	if !ok || dur.Unit != "s" || len(dur.Data.(metricdata.Histogram[float64]).DataPoints) == 0 {
		t.Fatalf("flush duration metric = %+v, want a histogram in s", dur)
	}
	buf, ok := telemetrytest.Find(rm, sink.MetricBufferedRows)
	if !ok || len(buf.Data.(metricdata.Gauge[int64]).DataPoints) != 2 {
		t.Fatalf("buffered rows metric = %+v, want one gauge per stage", buf)
	}
	for _, dp := range buf.Data.(metricdata.Gauge[int64]).DataPoints {
		if dp.Value != 0 {
			t.Fatalf("buffered rows = %d once drained, want 0", dp.Value)
		}
	}
}

func TestAnalytics_clickHouseOutageBecomesABacklog(t *testing.T) {
	dsn := testenv.ClickHouseDSN(t)
	direct := testenv.DialClickHouse(t, dsn, "")
	if _, err := clickhouse.Migrate(t.Context(), direct, nil); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	u, _ := url.Parse(dsn)
	proxy := testenv.StartProxy(t, u.Host)
	ch := testenv.DialClickHouse(t, dsn, proxy.Addr())
	rdb := testenv.Dial(t, testenv.RedisURL(t))
	mp, collect := telemetrytest.Metrics(t)
	a := newAnalytics(t, ch, writer.AnalyticsConfig{Partitions: analyticsPartitions, Batching: sink.Batching{FlushInterval: 50 * time.Millisecond, FlushTimeout: 500 * time.Millisecond, MaxBackoff: 100 * time.Millisecond},
		Runner: stream.RunnerConfig{Block: 50 * time.Millisecond, BatchSize: 2, HandlerTimeout: 700 * time.Millisecond,
			ClaimIdle: time.Second, ClaimInterval: 100 * time.Millisecond, MaxDeliveries: 1000}}, mp)
	proxy.Stop() // ClickHouse refuses connections from now on
	runStages(t, rdb, a.Stages()...)
	const n = 12
	want := publishHistory(t, rdb, n)
	topics := avail.NewTopics(analyticsPartitions)

	// Messages are delivered, fail to flush, stay pending and are delivered
	// again; none is acknowledged, none dead-lettered.
	testenv.WaitFor(t, 30*time.Second, func() bool {
		tr := stateOf(t, rdb, topics.Transitions, writer.StageAnalyticsTransitions)
		rs := stateOf(t, rdb, topics.Runs, writer.StageAnalyticsRuns)
		return tr.Pending > 0 && rs.Pending > 0 && tr.MaxDeliveries >= 2
	}, "pending messages, some delivered twice")
	var published int64
	for _, topic := range []stream.Topic{topics.Transitions, topics.Runs} {
		for p := range topic.Partitions {
			published += rdb.XLen(t.Context(), topic.Stream(p)).Val()
		}
	}
	for _, s := range []streamtest.GroupState{stateOf(t, rdb, topics.Transitions, writer.StageAnalyticsTransitions),
		stateOf(t, rdb, topics.Runs, writer.StageAnalyticsRuns)} {
		if acked := s.Read - s.Pending; acked != 0 || s.Dead != 0 {
			t.Fatalf("during the outage %d messages were acknowledged and %d dead-lettered, want none (%+v)", acked, s.Dead, s)
		}
	}
	if published != want.published {
		t.Fatalf("streams hold %d entries, want all %d published", published, want.published)
	}
	if got, ok := counts(t, direct); !ok || got.transitions+got.runs+got.sessions.Total != 0 {
		t.Fatalf("ClickHouse holds rows during the outage: %+v", got)
	}
	errs, ok := telemetrytest.Find(collect(), sink.MetricFlushErrors)
	if !ok || len(errs.Data.(metricdata.Sum[int64]).DataPoints) == 0 {
		t.Fatal("no flush errors counted during the outage")
	}

	proxy.Start(t) // ClickHouse is back: the backlog drains
	testenv.WaitFor(t, 60*time.Second, func() bool {
		got, ok := counts(t, direct)
		tr := stateOf(t, rdb, topics.Transitions, writer.StageAnalyticsTransitions)
		rs := stateOf(t, rdb, topics.Runs, writer.StageAnalyticsRuns)
		return ok && got.transitions == want.transitions && got.runs == want.runs && got.sessions == want.sessions &&
			tr.Pending+rs.Pending == 0 && tr.Lag+rs.Lag == 0
	}, "the backlog drained into ClickHouse")
	// No duplicates once deduplicated, however often rows were inserted.
	for table, wantRows := range map[string]uint64{"transitions": want.transitions, "runs": want.runs,
		"sessions": want.sessions.Total} {
		var got uint64
		if err := direct.Conn().QueryRow(t.Context(), "SELECT count() FROM "+table+" FINAL").Scan(&got); err != nil {
			t.Fatalf("count %s: %v", table, err)
		}
		if got != wantRows {
			t.Fatalf("%s FINAL holds %d rows, want %d", table, got, wantRows)
		}
	}
	for _, s := range []streamtest.GroupState{stateOf(t, rdb, topics.Transitions, writer.StageAnalyticsTransitions),
		stateOf(t, rdb, topics.Runs, writer.StageAnalyticsRuns)} {
		if s.Dead != 0 {
			t.Fatalf("%d messages dead-lettered", s.Dead)
		}
	}
}
