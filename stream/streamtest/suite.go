// Package streamtest is the conformance suite of the stream runtime: every
// Redis that dropstream supports (embedded miniredis, redis-server, Redis
// Cluster) must pass it. Run it from a test with a Backend:
//
//	streamtest.Run(t, streamtest.Backend{Name: "miniredis", Client: newClient})
package streamtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// Backend is a Redis to run the suite against.
type Backend struct {
	// Name labels the subtests.
	Name string
	// Client returns a client for one test. Tests isolate themselves by
	// random flow names, so clients may share a server.
	Client func(t *testing.T) redis.UniversalClient
	// Features tells which optional behaviours the backend has.
	Features Features
}

// Features are optional capabilities of a backend.
type Features struct {
	// Cluster is set for Redis Cluster: keys of different partitions live
	// in different slots.
	Cluster bool
	// IdleTimes is set when XINFO CONSUMERS reports how long each consumer
	// has been idle (the embedded Redis does not for consumers that only
	// read, so it deletes no consumer for being idle).
	IdleTimes bool
}

// waitTimeout bounds every wait of the suite.
const waitTimeout = 20 * time.Second

// Run runs every conformance test against the backend.
func Run(t *testing.T, b Backend) {
	tests := []struct {
		name string
		fn   func(t *testing.T, b Backend)
	}{
		{"PublishConsume_manyConsumers", testPublishConsumeManyConsumers},
		{"PublishAll_manyTopics", testPublishAllManyTopics},
		{"Redelivery_afterError", testRedeliveryAfterError},
		{"CrashRecovery_byClaim", testCrashRecoveryByClaim},
		{"DeadLetter_afterMaxDeliveries", testDeadLetterAfterMaxDeliveries},
		{"DeadLetter_permanentAndDrop", testPermanentAndDrop},
		{"DeadLetter_replayAndPurge", testDeadLetterReplayAndPurge},
		{"Restart_noLoss", testRestartNoLoss},
		{"Restart_ownPendingFirst", testOwnPendingFirst},
		{"Shutdown_finishesBatch", testShutdownFinishesBatch},
		{"Shutdown_noRetryAfterStop", testShutdownNoRetryAfterStop},
		{"Shutdown_hangingHandlerBounded", testShutdownHangingHandler},
		{"Redelivery_stagesIndependent", testRedeliveryStagesIndependent},
		{"SlowBatch_notHandledTwice", testSlowBatchNotHandledTwice},
		{"Restart_consumersBounded", testRestartConsumersBounded},
		{"Restart_instanceOwnPendingFirst", testRestartInstanceOwnPending},
		{"Consumers_idleDeleted", testConsumersIdleDeleted},
		{"Consumer_heldByAnotherStopsReadingUntilFree", testConsumerHeldByAnother},
		{"Lease_expiredWithNoOtherHolderIsTakenAgain", testLeaseExpiredTakenAgain},
		{"Order_perPartition", testOrderPerPartition},
		{"Trace_propagation", testTracePropagation},
		{"Ledger_onceByKey", testLedgerOnceByKey},
		{"Trim_keepsUnacknowledged", testTrimKeepsUnacknowledged},
		{"Trim_ungroupedByAgeOnlyWhenAsked", testTrimUngroupedByAgeOnlyWhenAsked},
		{"BatchHandler_settlesPerMessage", testBatchHandler},
		{"ReadBytes_boundsLargeEntries", testReadBytesBoundsReads},
		{"Pause_stopsAllCopiesUntilResumed", testPauseResume},
		{"Pause_copyStartedPaused", testPauseBeforeStart},
		{"Conservation_everyOutcome", testConservationEveryOutcome},
		{"DelayedRetry_doesNotBlockThePartition", testDelayedRetryDoesNotBlock},
		{"DelayedRetry_deadLettersAtMaxDeliveries", testDelayedRetryDeadLettersAtMaxDeliveries},
	}
	for _, tc := range tests {
		t.Run(b.Name+"/"+tc.name, func(t *testing.T) { tc.fn(t, b) })
	}
}

// newTopic returns a topic with a random flow name.
func newTopic(partitions int) stream.Topic {
	var buf [6]byte
	_, _ = rand.Read(buf[:])
	return stream.NewTopic("t"+hex.EncodeToString(buf[:]), "events", partitions)
}

// fastConfig makes redelivery quick enough for tests.
func fastConfig() stream.RunnerConfig {
	return stream.RunnerConfig{
		BatchSize:      100,
		Block:          50 * time.Millisecond,
		ClaimInterval:  25 * time.Millisecond,
		ClaimIdle:      300 * time.Millisecond,
		HandlerTimeout: 250 * time.Millisecond,
		StatsInterval:  50 * time.Millisecond,
		ErrorBackoff:   100 * time.Millisecond,
		Retry:          stream.RetryConfig{Disabled: true},
	}
}

// running is a runner in the background.
type running struct {
	runner *stream.Runner
	cancel context.CancelFunc
	done   chan error
}

// start runs a stage copy until the test ends or stop is called.
func start(t *testing.T, rdb redis.UniversalClient, stage stream.Stage, tel stream.Telemetry) *running {
	t.Helper()
	r, err := stream.NewRunner(rdb, stage, tel)
	if err != nil {
		t.Fatalf("new runner: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	run := &running{runner: r, cancel: cancel, done: make(chan error, 1)}
	go func() { run.done <- r.Run(ctx) }()
	t.Cleanup(run.stop)
	return run
}

// stop ends the copy and waits for it to return.
func (r *running) stop() {
	r.cancel()
	<-r.done
	r.done <- nil // later stops return at once
}

// publishN publishes n messages with keys "k<i mod keys>" and payload i.
func publishN(t *testing.T, rdb redis.UniversalClient, topic stream.Topic, from, n, keys int) []*stream.Message {
	t.Helper()
	msgs := make([]*stream.Message, 0, n)
	for i := from; i < from+n; i++ {
		msgs = append(msgs, stream.NewMessage(keyOf(i, keys), "test.event", []byte(strconv.Itoa(i))))
	}
	if err := stream.NewPublisher(rdb, stream.Telemetry{}).Publish(context.Background(), topic, msgs...); err != nil {
		t.Fatalf("publish: %v", err)
	}
	return msgs
}

// recorder collects handled messages safely across goroutines.
type recorder struct {
	mu    sync.Mutex
	seen  map[string]int // payload -> times handled successfully
	order map[string][]string
	calls map[string]int // payload -> handler calls
	max   map[string]int // payload -> highest attempt seen
}

func newRecorder() *recorder {
	return &recorder{seen: map[string]int{}, order: map[string][]string{}, calls: map[string]int{}, max: map[string]int{}}
}

func (r *recorder) call(m *stream.Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := string(m.Payload)
	r.calls[p]++
	r.max[p] = max(r.max[p], m.Attempt)
}

func (r *recorder) ok(m *stream.Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := string(m.Payload)
	r.seen[p]++
	r.order[m.Key] = append(r.order[m.Key], p)
}

func (r *recorder) distinct() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}

func (r *recorder) snapshot() (seen map[string]int, calls map[string]int, maxAttempt map[string]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen, calls, maxAttempt = map[string]int{}, map[string]int{}, map[string]int{}
	for k, v := range r.seen {
		seen[k] = v
	}
	for k, v := range r.calls {
		calls[k] = v
	}
	for k, v := range r.max {
		maxAttempt[k] = v
	}
	return seen, calls, maxAttempt
}

// waitAll waits until n distinct payloads were handled.
func (r *recorder) waitAll(t *testing.T, n int) {
	t.Helper()
	testenv.WaitFor(t, waitTimeout, func() bool { return r.distinct() >= n }, "handled fewer than %d messages", n)
}

// pendingCount returns the group's pending entries over all partitions.
func pendingCount(t *testing.T, rdb redis.UniversalClient, topic stream.Topic, group string) int64 {
	t.Helper()
	var total int64
	for p := 0; p < topic.Partitions; p++ {
		sum, err := rdb.XPending(context.Background(), topic.Stream(p), group).Result()
		if err != nil {
			t.Fatalf("xpending: %v", err)
		}
		total += sum.Count
	}
	return total
}

func keyOf(i, keys int) string { return "k" + strconv.Itoa(i%keys) }

// waitPending waits until the group's pending count is want.
func waitPending(t *testing.T, rdb redis.UniversalClient, topic stream.Topic, group string, want int64) {
	t.Helper()
	testenv.WaitFor(t, waitTimeout, func() bool { return pendingCount(t, rdb, topic, group) == want },
		"pending of group %s never reached %d", group, want)
}

// deadLetterCount returns the topic's dead letters.
func deadLetterCount(t *testing.T, rdb redis.UniversalClient, topic stream.Topic) int64 {
	t.Helper()
	n, err := stream.NewDeadLetters(rdb).Count(context.Background(), topic)
	if err != nil {
		t.Fatalf("dead letters: %v", err)
	}
	return n
}
