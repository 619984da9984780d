package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/internal/telemetrytest"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/stream/streamtest"
	"github.com/dropstream/dropstream/writer"
	"github.com/dropstream/dropstream/writer/sink"
)

// TestE2E_clickHouseKilledUnderLoadLosesAndDuplicatesNothing runs the
// availability analytics (the writer's ClickHouse append of the run
// records) on a private clickhouse-server while run records arrive
// steadily, kills the server with kill -9, keeps publishing until the
// stage's batches have waited through three handler timeouts, restarts the
// server, and checks that every run is in ClickHouse exactly once by its
// run id, that every entry is acknowledged and none dead-lettered, and
// that the log holds one warning when the writes started failing and one
// line when they recovered per failure episode, and no warning per message. ClaimIdle is ten
// minutes, beyond the test's waits: the backlog drains only if the held
// batches are written as soon as ClickHouse answers, not when their
// messages could be claimed again.
func TestE2E_clickHouseKilledUnderLoadLosesAndDuplicatesNothing(t *testing.T) {
	ctx := context.Background()
	rdb := dial(t, testenv.RedisURL(t))
	server := testenv.StartClickHouseCluster(t, testenv.ClickHouseClusterConfig{Shards: 1})
	ch := testenv.OpenClickHouse(t, server.Database(t)[0])
	// Every row inserted, duplicates included: a plain MergeTree never
	// collapses them, as the runs table does on merge.
	if err := ch.Conn().Exec(ctx, "CREATE MATERIALIZED VIEW runs_inserted ENGINE = MergeTree() ORDER BY run_id AS SELECT run_id FROM runs"); err != nil {
		t.Fatal(err)
	}
	logs := &telemetrytest.Logs{Next: slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	tel := stream.Telemetry{MeterProvider: mp, Logger: slog.New(logs)}

	const handlerTimeout, claimIdle = 6 * time.Second, 10 * time.Minute
	an, err := writer.NewAnalytics(ch, writer.AnalyticsConfig{Partitions: partitions,
		Batching: sink.Batching{FlushInterval: 50 * time.Millisecond, FlushTimeout: 5 * time.Second},
		Runner:   stream.RunnerConfig{HandlerTimeout: handlerTimeout, ClaimIdle: claimIdle, Block: 100 * time.Millisecond}}, tel)
	if err != nil {
		t.Fatal(err)
	}
	streamtest.RunStages(t, rdb, tel, an.Stages()...)
	t.Cleanup(func() { _ = an.Close() })

	topics := avail.NewTopics(partitions)
	pub := newRunPublisher(t, rdb, topics)
	count := func(q string) uint64 {
		var n uint64
		if err := ch.Conn().QueryRow(ctx, q).Scan(&n); err != nil {
			t.Logf("%s: %v", q, err)
			return 0
		}
		return n
	}
	testenv.WaitFor(t, 60*time.Second, func() bool { return count("SELECT uniqExact(run_id) FROM runs") >= 200 },
		"runs appended before the kill")

	server.Kill(0)
	killedAt := pub.published()
	failing := func() float64 { return gauge(t, reader, sink.MetricSinkFailingFor, writer.StageAnalyticsRuns) }
	testenv.WaitFor(t, 60*time.Second, func() bool { return failing() >= (3 * handlerTimeout).Seconds() },
		"the runs stage failing for three handler timeouts")
	heldAt := pub.published()
	server.Restart(t, 0)
	// Once the writes go through again, the stream keeps flowing a while.
	testenv.WaitFor(t, 60*time.Second, func() bool { return failing() == 0 }, "a successful write after the restart")
	testenv.WaitFor(t, 60*time.Second, func() bool { return pub.published() >= heldAt+200 }, "runs published after the restart")
	n := pub.stop()
	t.Logf("published %d runs: %d before the kill, %d during the outage", n, killedAt, heldAt-killedAt)

	// The wait is far below ClaimIdle: only a drain that starts when
	// ClickHouse answers ends within it.
	var st runsGroup
	testenv.WaitFor(t, 2*time.Minute, func() bool {
		st = runsState(t, rdb, topics.Runs)
		return count("SELECT uniqExact(run_id) FROM runs") == n && st.pending == 0 && st.lag == 0
	}, func() string {
		return fmt.Sprintf("%d runs appended of %d, group %+v", count("SELECT uniqExact(run_id) FROM runs"), n, st)
	})

	rows := count("SELECT count() FROM runs FINAL")
	outside := count(fmt.Sprintf("SELECT count() FROM runs WHERE toUInt64OrZero(substring(run_id, 5)) >= %d OR NOT startsWith(run_id, 'run-')", n))
	if rows != n || outside != 0 {
		t.Errorf("runs FINAL holds %d rows (%d not published), want the %d published, once each", rows, outside, n)
	}
	if st.dead != 0 || st.read < int64(n) {
		t.Errorf("runs group %+v: want every one of %d entries read and none dead-lettered", st, n)
	}
	// Inserted twice can only be a batch whose insert ClickHouse committed
	// as it was killed; the table collapses it by run id.
	t.Logf("rows inserted: %d for %d runs", count("SELECT count() FROM runs_inserted"), n)

	stage := map[string]string{"stage": writer.StageAnalyticsRuns}
	failed := logs.Count("clickhouse write failing; the stage holds its batches and retries until it answers", stage)
	recovered := logs.Count("clickhouse write recovered", stage)
	perMessage := logs.Count("message failed", stage)
	// One episode for the outage; a loaded machine may add another (a
	// flush past FlushTimeout), logged the same way.
	if failed < 1 || recovered != failed || perMessage != 0 {
		t.Errorf("log: %d failing warnings, %d recovered lines and %d per-message warnings for %s; want one of each per episode and none per message",
			failed, recovered, perMessage, writer.StageAnalyticsRuns)
	}
}

// runPublisher publishes run records run-000000, run-000001, … to the run
// topic, a few every few milliseconds, until stopped.
type runPublisher struct {
	n    atomic.Uint64
	quit chan struct{}
	done chan struct{}
}

func newRunPublisher(t *testing.T, rdb redis.UniversalClient, topics avail.Topics) *runPublisher {
	p := &runPublisher{quit: make(chan struct{}), done: make(chan struct{})}
	pub := stream.NewPublisher(rdb, stream.Telemetry{})
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	go func() {
		defer close(p.done)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-p.quit:
				return
			case <-tick.C:
			}
			msgs := make([]*stream.Message, 5)
			for i := range msgs {
				k := p.n.Load() + uint64(i)
				venue := fmt.Sprintf("v%d", k%16)
				r := avail.RunRecord{RunID: fmt.Sprintf("run-%06d", k), SourceID: "src-" + venue, Provider: "resy",
					ScopeKey: "src|" + venue + "|2099-03-08|2|", StartedAt: at, RunAt: at.Add(time.Duration(k) * time.Second),
					Status: avail.StatusOK, Observed: 3, Applied: true}
				body, _ := json.Marshal(r)
				msgs[i] = stream.NewMessage(r.ScopeKey, avail.TypeRun, body)
			}
			if err := pub.Publish(context.Background(), topics.Runs, msgs...); err != nil {
				t.Errorf("publish runs: %v", err)
				return
			}
			p.n.Add(uint64(len(msgs)))
		}
	}()
	t.Cleanup(func() { _ = p.stop() })
	return p
}

func (p *runPublisher) published() uint64 { return p.n.Load() }

// stop stops publishing and returns how many runs were published.
func (p *runPublisher) stop() uint64 {
	select {
	case <-p.quit:
	default:
		close(p.quit)
	}
	<-p.done
	return p.n.Load()
}

// runsGroup is the state of the runs stage's group over the partitions.
type runsGroup struct{ read, pending, lag, dead int64 }

func runsState(t *testing.T, rdb redis.UniversalClient, topic stream.Topic) runsGroup {
	t.Helper()
	var s runsGroup
	for p := range topic.Partitions {
		s.dead += rdb.XLen(t.Context(), topic.DeadLetterStream(p)).Val()
		groups, err := rdb.XInfoGroups(t.Context(), topic.Stream(p)).Result()
		if err != nil {
			s.lag++ // not created yet
			continue
		}
		for _, g := range groups {
			if g.Name == writer.StageAnalyticsRuns {
				s.read += g.EntriesRead
				s.pending += g.Pending
				s.lag += max(g.Lag, 0)
			}
		}
	}
	return s
}

// gauge returns the value of the float gauge name for stage, 0 if absent.
func gauge(t *testing.T, reader *sdkmetric.ManualReader, name, stage string) float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			g, ok := m.Data.(metricdata.Gauge[float64])
			if m.Name != name || !ok {
				continue
			}
			for _, dp := range g.DataPoints {
				if v, _ := dp.Attributes.Value("stage"); v.AsString() == stage {
					return dp.Value
				}
			}
		}
	}
	return 0
}
