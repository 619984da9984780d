package e2e

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/collector"
	"github.com/dropstream/dropstream/diff"
	"github.com/dropstream/dropstream/flows/avail/watch"
	"github.com/dropstream/dropstream/internal/egress/egresstest"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer"
	"github.com/dropstream/dropstream/writer/sink"
)

// idleTimeout bounds the wait for the in-process pipeline to settle.
const idleTimeout = 30 * time.Second

// TestAvailability_simulatorToWebhook drives the whole availability
// pipeline in process, one explicit poll per round, and after every round
// checks the projection, the webhook deliveries (signed, once per open
// window, with the trace of the confirming poll) and the ClickHouse counts
// against the simulator's truth.
func TestAvailability_simulatorToWebhook(t *testing.T) {
	simulatorToWebhook(t, testenv.RedisURL(t))
}

// simulatorToWebhook is TestAvailability_simulatorToWebhook on the Redis of
// redisURL (a URL, or the node list of a Redis Cluster).
func simulatorToWebhook(t *testing.T, redisURL string) {
	const rounds = 8 // after the baseline poll
	ctx := context.Background()
	topics := avail.NewTopics(partitions)
	rdb := dial(t, redisURL)
	ch := testenv.ClickHouse(t)
	tel := telemetry(t)

	w := newWorld(t, 4)
	hook := newWebhook(t)
	w.newWatchers(t, ctx, rdb, hook)
	proj := startStages(t, rdb, ch, topics, tel)

	pub := stream.NewPublisher(rdb, tel)
	col, err := collector.NewCollector(topics, pub, collector.CollectorConfig{NoJitter: true, Telemetry: tel, Egress: egresstest.Loopback(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = col.Close() })
	if err := col.Upsert(w.src); err != nil {
		t.Fatal(err)
	}

	groups := pipelineGroups(topics)
	for round := 0; round <= rounds; round++ {
		if round > 0 {
			w.sim.Advance(1)
		}
		if err := col.PollOnce(ctx, sourceID); err != nil {
			t.Fatalf("round %d: poll: %v", round, err)
		}
		w.observe(t, ctx, rdb, topics)
		t0 := time.Now()
		why := new(reason)
		testenv.WaitFor(t, idleTimeout, func() bool { return why.set(busy(ctx, rdb, groups)) },
			"round %d: pipeline idle (still busy: %s)", round, why)
		exp := w.expect(t, nil)
		t.Logf("round %d: %s; idle after %v", round, exp.summary(), time.Since(t0).Round(time.Millisecond))
		w.checkAll(t, ctx, rdb, topics, proj, ch, hook, exp)
		checkProjectionEntities(t, ctx, proj, exp, true)
		if round == rounds {
			checkClickHouseSessions(t, ctx, ch, exp)
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	if exp := w.expect(t, nil); len(exp.deliveries) == 0 || exp.rawCloses == 0 {
		t.Fatalf("the simulated churn produced no notification or no close: %s", exp.summary())
	}
}

// startStages runs every availability stage in process, one runner each,
// until the test ends, and returns the projection to read.
func startStages(t *testing.T, rdb redis.UniversalClient, ch *clickhouse.Client, topics avail.Topics, tel stream.Telemetry) *writer.Projection {
	t.Helper()
	fast := stream.RunnerConfig{Block: 100 * time.Millisecond, StatsInterval: time.Minute}
	proj, err := writer.NewProjection(rdb, writer.ProjectionConfig{Partitions: partitions, Runner: fast}, tel)
	if err != nil {
		t.Fatal(err)
	}
	store, err := watch.NewStore(rdb, watch.StoreConfig{Logger: tel.Logger})
	if err != nil {
		t.Fatal(err)
	}
	channels, err := notifier.NewChannels(notifier.WebhookConfig{Propagator: tel.Propagator, Egress: egresstest.Loopback(t)}, tel.Logger)
	if err != nil {
		t.Fatal(err)
	}
	notify, err := watch.NewStage(rdb, topics, store, channels, watch.Config{Runner: fast}, tel)
	if err != nil {
		t.Fatal(err)
	}
	analytics, err := writer.NewAnalytics(ch, writer.AnalyticsConfig{Partitions: partitions, Batching: sink.Batching{FlushInterval: 100 * time.Millisecond}, Runner: fast}, tel)
	if err != nil {
		t.Fatal(err)
	}
	pub := stream.NewPublisher(rdb, tel)
	normalizer, differ := collector.NewNormalizer(topics, pub), diff.NewStage(rdb, topics, tel)
	normalizer.Config.Block, differ.Config.Block = fast.Block, fast.Block
	stages := append([]stream.Stage{normalizer, differ, proj.Stage(), notify}, analytics.Stages()...)

	runCtx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		stop()
		wg.Wait()
		_ = analytics.Close()
	})
	for _, s := range stages {
		r, err := stream.NewRunner(rdb, s, tel)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			if err := r.Run(runCtx); err != nil {
				t.Errorf("stage %s: %v", s.Name, err)
			}
		})
	}
	return proj
}

// telemetry traces with a real SDK tracer provider (so trace ids exist and
// propagate) and W3C propagation, and logs warnings and errors to the test.
func telemetry(t *testing.T) stream.Telemetry {
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return stream.Telemetry{TracerProvider: tp, Propagator: propagation.TraceContext{}, Logger: logger}
}

// testWriter writes log lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

func dial(t *testing.T, url string) redis.UniversalClient {
	t.Helper()
	rdb, err := stream.Dial(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}
