package streamtest

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

func testRestartNoLoss(t *testing.T, b Backend) {
	rdb := b.Client(t)
	topic := newTopic(2)
	const n = 2000
	rec := newRecorder()
	stage := stream.Stage{Name: "restart", Topic: topic, Config: fastConfig(),
		Handler: func(_ context.Context, m *stream.Message) error {
			rec.ok(m)
			return nil
		}}
	first := start(t, rdb, stage, stream.Telemetry{})
	publishN(t, rdb, topic, 0, n/2, 11)
	testenv.WaitFor(t, waitTimeout, func() bool { return rec.distinct() >= n/4 }, "first copy handled nothing")
	first.stop()
	publishN(t, rdb, topic, n/2, n/2, 11)
	start(t, rdb, stage, stream.Telemetry{})
	rec.waitAll(t, n)
	seen, _, _ := rec.snapshot()
	for p, c := range seen {
		if c != 1 {
			t.Errorf("payload %s handled %d times across the restart", p, c)
		}
	}
	waitPending(t, rdb, topic, "restart", 0)
	AssertConserved(t, rdb, topic, "restart")
}

func testOwnPendingFirst(t *testing.T, b Backend) {
	rdb := b.Client(t)
	topic := newTopic(1)
	const n = 250
	publishN(t, rdb, topic, 0, n, 4)
	ctx := context.Background()
	// The copy "c1" read everything, then crashed before acknowledging.
	if err := rdb.XGroupCreateMkStream(ctx, topic.Stream(0), "own", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "own", Consumer: "c1",
		Streams: []string{topic.Stream(0), ">"}, Count: n, Block: -1}).Err(); err != nil {
		t.Fatal(err)
	}
	publishN(t, rdb, topic, n, n, 4)
	// It restarts under the same name; claiming cannot help (idle 1h), so
	// only reading its own pending entries first recovers them.
	cfg := fastConfig()
	cfg.Consumer = "c1"
	cfg.ClaimIdle = time.Hour
	rec := newRecorder()
	var firstNew int = -1
	start(t, rdb, stream.Stage{Name: "own", Topic: topic, Config: cfg,
		Handler: func(_ context.Context, m *stream.Message) error {
			rec.ok(m)
			rec.mu.Lock()
			if m.Attempt == 1 && firstNew < 0 {
				firstNew = len(rec.seen)
			}
			rec.mu.Unlock()
			return nil
		}}, stream.Telemetry{})
	rec.waitAll(t, 2*n)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if firstNew != n+1 {
		t.Errorf("first new message handled as number %d, want %d (after all %d pending)", firstNew, n+1, n)
	}
	for p, c := range rec.seen {
		if c != 1 {
			t.Errorf("payload %s handled %d times", p, c)
		}
	}
	AssertConserved(t, rdb, topic, "own")
}

func testShutdownFinishesBatch(t *testing.T, b Backend) {
	rdb := b.Client(t)
	topic := newTopic(1)
	const n = 50
	publishN(t, rdb, topic, 0, n, 1)
	entered := make(chan struct{})
	release := make(chan struct{})
	rec := newRecorder()
	cfg := fastConfig()
	cfg.HandlerTimeout = 5 * time.Second
	cfg.ClaimIdle = time.Hour
	run := start(t, rdb, stream.Stage{Name: "shutdown", Topic: topic, Config: cfg,
		Handler: func(ctx context.Context, m *stream.Message) error {
			if string(m.Payload) == "0" {
				close(entered)
				<-release
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			rec.ok(m)
			return nil
		}}, stream.Telemetry{})
	<-entered
	run.cancel() // shutdown requested while the batch is in hand
	close(release)
	<-run.done
	run.done <- nil
	if got := rec.distinct(); got != n {
		t.Errorf("handled %d of the batch of %d before stopping", got, n)
	}
	if got := pendingCount(t, rdb, topic, "shutdown"); got != 0 {
		t.Errorf("pending after graceful stop: %d, want 0", got)
	}
}
