package streamtest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/stream"
)

// waitDone waits for a stopped copy's Run to return, failing the test
// after waitTimeout (an unbounded shutdown takes far longer).
func waitDone(t *testing.T, run *running, what string) {
	t.Helper()
	select {
	case <-run.done:
		run.done <- nil
	case <-time.After(waitTimeout):
		t.Fatalf("%s: Run did not return within %s of its context ending", what, waitTimeout)
	}
}

// testShutdownNoRetryAfterStop: with the default retry config, a batch of
// 256 messages whose handler fails at once gets no retry once the copy is
// stopped: each message is tried at most once more, every one stays
// pending, and the next copy gets them all.
func testShutdownNoRetryAfterStop(t *testing.T, b Backend) {
	rdb := b.Client(t)
	topic := newTopic(1)
	const n = 256
	publishN(t, rdb, topic, 0, n, 16)
	cfg := fastConfig()
	cfg.BatchSize = n
	cfg.Retry = stream.RetryConfig{} // default: 2 retries, pauses from 50ms to 1s
	cfg.HandlerTimeout = 5 * time.Second
	cfg.ClaimIdle = time.Minute
	entered, stopped := make(chan struct{}), make(chan struct{})
	var calls atomic.Int64
	var once sync.Once
	stage := stream.Stage{Name: "stopfail", Topic: topic, Config: cfg,
		Handler: func(_ context.Context, m *stream.Message) error {
			calls.Add(1)
			once.Do(func() {
				close(entered)
				<-stopped
			})
			return errFlaky
		}}
	run := start(t, rdb, stage, stream.Telemetry{})
	<-entered
	run.cancel()
	close(stopped)
	waitDone(t, run, "failing batch")
	if got := calls.Load(); got > n {
		t.Errorf("handler called %d times for a batch of %d stopped at its first call: retries ran after stop", got, n)
	}
	if got := pendingCount(t, rdb, topic, "stopfail"); got != n {
		t.Errorf("pending after stop: %d, want all %d", got, n)
	}
	// The next copy, under the same name, gets every message again.
	cfg.Consumer = run.runner.Info().Consumer
	rec := newRecorder()
	start(t, rdb, stream.Stage{Name: "stopfail", Topic: topic, Config: cfg,
		Handler: func(_ context.Context, m *stream.Message) error {
			rec.call(m)
			rec.ok(m)
			return nil
		}}, stream.Telemetry{})
	rec.waitAll(t, n)
	seen, _, maxAttempt := rec.snapshot()
	for p, c := range seen {
		if c != 1 || maxAttempt[p] != 2 {
			t.Errorf("payload %s: handled %d times at attempt %d by the next copy; want once at attempt 2", p, c, maxAttempt[p])
		}
	}
	waitPending(t, rdb, topic, "stopfail", 0)
}

// testShutdownHangingHandler: a copy stopped while its handler hangs
// starts no further message of the batch once the handler's time is up;
// the rest stay pending for the next copy, which handles each once.
func testShutdownHangingHandler(t *testing.T, b Backend) {
	rdb := b.Client(t)
	topic := newTopic(1)
	const n = 100
	publishN(t, rdb, topic, 0, n, 4)
	cfg := fastConfig()
	cfg.HandlerTimeout = 300 * time.Millisecond
	cfg.ClaimIdle = time.Minute
	entered := make(chan struct{})
	var calls atomic.Int64
	var once sync.Once
	run := start(t, rdb, stream.Stage{Name: "stophang", Topic: topic, Config: cfg,
		Handler: func(ctx context.Context, m *stream.Message) error {
			calls.Add(1)
			once.Do(func() { close(entered) })
			<-ctx.Done() // hangs until its deadline
			return ctx.Err()
		}}, stream.Telemetry{})
	<-entered
	run.cancel()
	waitDone(t, run, "hanging handler")
	// The call in progress at stop, and at most one started before its
	// deadline passed.
	if got := calls.Load(); got > 2 {
		t.Errorf("handler called %d times after a stop during its first call, want at most 2", got)
	}
	if got := pendingCount(t, rdb, topic, "stophang"); got != n {
		t.Errorf("pending after stop: %d, want all %d", got, n)
	}
	cfg.Consumer = run.runner.Info().Consumer
	rec := newRecorder()
	start(t, rdb, stream.Stage{Name: "stophang", Topic: topic, Config: cfg,
		Handler: func(_ context.Context, m *stream.Message) error {
			rec.ok(m)
			return nil
		}}, stream.Telemetry{})
	rec.waitAll(t, n)
	seen, _, _ := rec.snapshot()
	for p, c := range seen {
		if c != 1 {
			t.Errorf("payload %s handled %d times by the next copy, want 1", p, c)
		}
	}
}

// readAsDead makes consumer take every entry of the topic's partitions
// without acknowledging them, as a copy that then crashed.
func readAsDead(t *testing.T, rdb redis.UniversalClient, topic stream.Topic, group, consumer string) {
	t.Helper()
	ctx := context.Background()
	for p := 0; p < topic.Partitions; p++ {
		if err := rdb.XGroupCreateMkStream(ctx, topic.Stream(p), group, "0").Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: group, Consumer: consumer,
			Streams: []string{topic.Stream(p), ">"}, Count: 1000, Block: -1}).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// testRedeliveryStagesIndependent: while one stage's redelivered message
// hangs in its handler, another stage's redelivered messages are handled,
// and that other stage stops at once when asked.
func testRedeliveryStagesIndependent(t *testing.T, b Backend) {
	rdb := b.Client(t)
	hangTopic, okTopic := newTopic(2), newTopic(2)
	publishN(t, rdb, hangTopic, 0, 4, 4)
	publishN(t, rdb, okTopic, 0, 20, 4)
	readAsDead(t, rdb, hangTopic, "hang", "c1")
	readAsDead(t, rdb, okTopic, "healthy", "c1")

	cfg := fastConfig()
	cfg.Consumer = "c1" // restarted under its name: its pending entries are redeliveries
	cfg.ClaimIdle = time.Hour
	cfg.HandlerTimeout = time.Minute
	hanging, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	var once sync.Once
	start(t, rdb, stream.Stage{Name: "hang", Topic: hangTopic, Config: cfg,
		Handler: func(ctx context.Context, m *stream.Message) error {
			once.Do(func() { close(hanging) })
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		}}, stream.Telemetry{})
	<-hanging

	rec := newRecorder()
	healthy := start(t, rdb, stream.Stage{Name: "healthy", Topic: okTopic, Config: cfg,
		Handler: func(_ context.Context, m *stream.Message) error {
			rec.call(m)
			rec.ok(m)
			return nil
		}}, stream.Telemetry{})
	rec.waitAll(t, 20)
	_, _, maxAttempt := rec.snapshot()
	for p, a := range maxAttempt {
		if a != 2 {
			t.Errorf("payload %s handled at attempt %d, want 2 (a redelivery)", p, a)
		}
	}
	healthy.cancel()
	waitDone(t, healthy, "healthy stage beside a hanging one")
}
