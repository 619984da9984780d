package writer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/clickhouse/clickhousetest"
	"github.com/dropstream/dropstream/internal/telemetrytest"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer"
	"github.com/dropstream/dropstream/writer/sink"
)

// delivered returns transition messages as the runtime hands them to a
// batch handler: with ids, partition 0 and attempt.
func delivered(attempt int, trs ...avail.Transition) []*stream.Message {
	msgs := make([]*stream.Message, len(trs))
	for i, tr := range trs {
		body, _ := json.Marshal(tr)
		msgs[i] = stream.NewMessage(tr.ScopeKey, avail.TypeTransition, body)
		msgs[i].ID, msgs[i].Attempt = fmt.Sprintf("%d-0", i+1), attempt
	}
	return msgs
}

// flushes returns the number of flushes MetricFlushDuration recorded in
// rm for stage, or for every stage when stage is "".
func flushes(t *testing.T, rm metricdata.ResourceMetrics, stage string) uint64 {
	t.Helper()
	dur, ok := telemetrytest.Find(rm, sink.MetricFlushDuration)
	if !ok {
		t.Fatal("no flush duration metric")
	}
	var n uint64
	for _, dp := range dur.Data.(metricdata.Histogram[float64]).DataPoints {
		if v, _ := dp.Attributes.Value("stage"); stage == "" || v.AsString() == stage {
			n += dp.Count
		}
	}
	return n
}

// migrated returns a client of a fresh, migrated ClickHouse database.
func migrated(t *testing.T) *clickhouse.Client {
	t.Helper()
	ch := testenv.DialClickHouse(t, testenv.ClickHouseDSN(t), "")
	if _, err := clickhouse.Migrate(t.Context(), ch, nil); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return ch
}

func TestAnalytics_undecodableMessageIsDeadLetteredAndTheRestWritten(t *testing.T) {
	ch := migrated(t)
	a := newAnalytics(t, ch, writer.AnalyticsConfig{Partitions: 1, Batching: sink.Batching{FlushInterval: 10 * time.Millisecond}}, nil)
	e := slot("bad-batch")
	msgs := delivered(1, scoped(e, "open", 1, false), scoped(e, "open", 2, true),
		closing(scoped(e, "close", 3, false), 1))
	msgs = append(msgs[:1], append([]*stream.Message{{ID: "9-0", Key: "x", Type: avail.TypeTransition,
		Payload: []byte(`{"entity":`), Attempt: 1}}, msgs[1:]...)...)

	err := a.HandleTransitions(t.Context(), msgs)
	var be *stream.BatchError
	if !errors.As(err, &be) || len(be.Errs) != len(msgs) {
		t.Fatalf("HandleTransitions = %v, want a *stream.BatchError with %d errors", err, len(msgs))
	}
	for i, err := range be.Errs {
		if wantPermanent := i == 1; stream.IsPermanent(err) != wantPermanent || (!wantPermanent && err != nil) {
			t.Fatalf("message %d settled with %v, want only message 1 permanent and the others nil", i, err)
		}
	}
	got, ok := counts(t, ch)
	want := clickhousetest.SessionCounts{Total: 1, Closed: 1}
	if !ok || got.transitions != 3 || got.sessions != want {
		t.Fatalf("ClickHouse holds %+v (ok %v), want 3 transitions and one closed session", got, ok)
	}
}

// With ClickHouse down, a batch that reaches its handler's deadline is
// held (kept in hand and tried again once the sink answers), not failed
// back to the claim; an undecodable message is a permanent error.
func TestAnalytics_clickHouseDownHoldsTheBatch(t *testing.T) {
	dsn := testenv.ClickHouseDSN(t)
	u, _ := url.Parse(dsn)
	proxy := testenv.StartProxy(t, u.Host)
	ch := testenv.DialClickHouse(t, dsn, proxy.Addr())
	proxy.Stop()
	a := newAnalytics(t, ch, writer.AnalyticsConfig{Partitions: 1, Batching: sink.Batching{FlushInterval: 10 * time.Millisecond, FlushTimeout: 100 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}}, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	msgs := delivered(1, scoped(slot("down"), "open", 1, false))
	msgs = append(msgs, &stream.Message{ID: "9-0", Type: avail.TypeTransition, Payload: []byte(`[]`), Attempt: 1})
	err := a.HandleTransitions(ctx, msgs)
	var be *stream.BatchError
	if !errors.As(err, &be) || len(be.Errs) != 2 {
		t.Fatalf("HandleTransitions = %v, want a *stream.BatchError", err)
	}
	if !stream.IsHold(be.Errs[0]) || stream.IsPermanent(be.Errs[0]) {
		t.Fatalf("decoded message settled with %v, want held at the handler's deadline", be.Errs[0])
	}
	if !stream.IsPermanent(be.Errs[1]) {
		t.Fatalf("undecodable message settled with %v, want permanent", be.Errs[1])
	}
}

// TestAnalytics_batchesShareAFlush checks that the batches of concurrent
// handlers (partitions, copies) go into one INSERT: only BatchRows can
// flush (no linger, a FlushInterval of an hour), and it is reached only by
// the four batches together.
func TestAnalytics_batchesShareAFlush(t *testing.T) {
	ch := migrated(t)
	mp, collect := telemetrytest.Metrics(t)
	a := newAnalytics(t, ch, writer.AnalyticsConfig{Partitions: 1, Batching: sink.Batching{BatchRows: 8, Linger: -1, FlushInterval: time.Hour}, Runner: stream.RunnerConfig{HandlerTimeout: 2 * time.Hour}}, mp)
	errs := make(chan error, 4)
	for i := range 4 {
		e := slot(fmt.Sprintf("shared-%d", i))
		// Stable transitions only: no session rows, two rows per batch.
		msgs := delivered(1, scoped(e, "open", 2, true), scoped(e, "close", 4, true))
		go func() { errs <- a.HandleTransitions(t.Context(), msgs) }()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatalf("HandleTransitions: %v", err)
		}
	}
	if n, err := clickhouse.CountTransitions(t.Context(), ch, clickhouse.Filter{}); err != nil || n != 8 {
		t.Fatalf("CountTransitions = %d, %v; want 8", n, err)
	}
	if n := flushes(t, collect(), ""); n != 1 {
		t.Fatalf("%d flushes, want the four batches in one", n)
	}
}

// TestAnalytics_readAheadCopiesShareOneFlush checks that Stages returns
// ReadAhead copies of each stage, with consumer names of their own, which
// share the stage's batcher: a batch one copy has queued goes into the
// flush that another copy's batch triggers, one INSERT for both.
func TestAnalytics_readAheadCopiesShareOneFlush(t *testing.T) {
	ch := migrated(t)
	mp, collect := telemetrytest.Metrics(t)
	a := newAnalytics(t, ch, writer.AnalyticsConfig{Partitions: 1, ReadAhead: 2, Batching: sink.Batching{BatchRows: 1000, Linger: time.Millisecond, FlushInterval: time.Hour}, Runner: stream.RunnerConfig{Consumer: "c",
		HandlerTimeout: 2 * time.Hour}}, mp)
	stages := a.Stages()
	var names []string
	for _, s := range stages {
		names = append(names, s.Name+"/"+s.Config.Consumer)
	}
	want := []string{writer.StageAnalyticsTransitions + "/c", writer.StageAnalyticsRuns + "/c",
		writer.StageAnalyticsTransitions + "/c-1", writer.StageAnalyticsRuns + "/c-1"}
	if !slices.Equal(names, want) {
		t.Fatalf("stages %v, want %v", names, want)
	}
	// Copy 0 gets a partial batch: alone, it would wait for FlushInterval
	// (an hour).
	e0, e1 := slot("copy-0"), slot("copy-1")
	waiting := make(chan error, 1)
	go func() {
		waiting <- stages[0].BatchHandler(t.Context(), delivered(1, scoped(e0, "open", 2, true)))
	}()
	testenv.WaitFor(t, 5*time.Second, func() bool {
		m, ok := telemetrytest.Find(collect(), sink.MetricBufferedRows)
		if !ok {
			return false
		}
		for _, dp := range m.Data.(metricdata.Gauge[int64]).DataPoints {
			if v, _ := dp.Attributes.Value("stage"); v.AsString() == writer.StageAnalyticsTransitions && dp.Value == 1 {
				return true
			}
		}
		return false
	}, "copy 0's row buffered")
	// Copy 1 gets a redelivered batch, flushed after Linger, with copy 0's.
	if err := stages[2].BatchHandler(t.Context(), delivered(2, scoped(e1, "open", 2, true))); err != nil {
		t.Fatalf("copy 1: %v", err)
	}
	if err := <-waiting; err != nil {
		t.Fatalf("copy 0: %v", err)
	}
	n, err := clickhouse.CountTransitions(t.Context(), ch, clickhouse.Filter{})
	if err != nil || n != 2 {
		t.Fatalf("CountTransitions = %d, %v; want both copies' rows", n, err)
	}
	if n := flushes(t, collect(), writer.StageAnalyticsTransitions); n != 1 {
		t.Fatalf("%d flushes of transitions, want both copies' batches in one", n)
	}
}

// TestAnalytics_fullTransitionsBatchFlushesWithoutWaiting checks that a
// batch as large as the transitions stage reads (TransitionsBatchSize,
// smaller than the runs stage's) is flushed once no other batch comes,
// not after FlushInterval.
func TestAnalytics_fullTransitionsBatchFlushesWithoutWaiting(t *testing.T) {
	ch := migrated(t)
	a := newAnalytics(t, ch, writer.AnalyticsConfig{Partitions: 1, TransitionsBatchSize: 2, Batching: sink.Batching{FlushInterval: time.Hour}, Runner: stream.RunnerConfig{HandlerTimeout: 2 * time.Hour}}, nil)
	e := slot("full-batch")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := a.HandleTransitions(ctx, delivered(1, scoped(e, "open", 2, true), scoped(e, "close", 4, true))); err != nil {
		t.Fatalf("HandleTransitions of a full batch: %v (waited for the flush interval)", err)
	}
	if n, err := clickhouse.CountTransitions(t.Context(), ch, clickhouse.Filter{}); err != nil || n != 2 {
		t.Fatalf("CountTransitions = %d, %v; want 2", n, err)
	}
}
