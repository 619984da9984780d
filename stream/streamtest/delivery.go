package streamtest

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/stream"
)

var errFlaky = errors.New("flaky failure")

func testPublishConsumeManyConsumers(t *testing.T, b Backend) {
	rdb := b.Client(t)
	topic := newTopic(4)
	const n = 3000
	publishN(t, rdb, topic, 0, n, 97)
	rec := newRecorder()
	perCopy := make([]*recorder, 3)
	// No copy fails or stalls here, so no entry should ever be claimed;
	// a long claim idle keeps a starved machine from claiming one anyway
	// (claims and their duplicates have tests of their own).
	cfg := fastConfig()
	cfg.ClaimIdle = 10 * time.Second
	for i := range perCopy {
		perCopy[i] = newRecorder()
		mine := perCopy[i]
		start(t, rdb, stream.Stage{Name: "many", Topic: topic, Config: cfg,
			Handler: func(_ context.Context, m *stream.Message) error {
				rec.ok(m)
				mine.ok(m)
				return nil
			}}, stream.Telemetry{})
	}
	rec.waitAll(t, n)
	seen, _, _ := rec.snapshot()
	for p, c := range seen {
		if c != 1 {
			t.Errorf("payload %s handled %d times, want 1", p, c)
		}
	}
	total := 0
	for _, r := range perCopy {
		total += r.distinct()
	}
	if total != n {
		t.Errorf("copies handled %d messages in all, want %d", total, n)
	}
	waitPending(t, rdb, topic, "many", 0)
	AssertConserved(t, rdb, topic, "many")
}

func testRedeliveryAfterError(t *testing.T, b Backend) {
	rdb := b.Client(t)
	topic := newTopic(2)
	const n = 200
	publishN(t, rdb, topic, 0, n, 10)
	rec := newRecorder()
	start(t, rdb, stream.Stage{Name: "redeliver", Topic: topic, Config: fastConfig(),
		Handler: func(_ context.Context, m *stream.Message) error {
			rec.call(m)
			i, _ := strconv.Atoi(string(m.Payload))
			if i%10 == 0 && m.Attempt == 1 {
				return errFlaky
			}
			rec.ok(m)
			return nil
		}}, stream.Telemetry{})
	rec.waitAll(t, n)
	seen, calls, maxAttempt := rec.snapshot()
	for i := 0; i < n; i++ {
		p := strconv.Itoa(i)
		wantCalls, wantAttempt := 1, 1
		if i%10 == 0 {
			wantCalls, wantAttempt = 2, 2
		}
		if seen[p] != 1 || calls[p] != wantCalls || maxAttempt[p] != wantAttempt {
			t.Errorf("message %d: handled %d, calls %d, attempt %d; want 1, %d, %d", i, seen[p], calls[p], maxAttempt[p], wantCalls, wantAttempt)
		}
	}
	waitPending(t, rdb, topic, "redeliver", 0)
	AssertConserved(t, rdb, topic, "redeliver")
}

func testCrashRecoveryByClaim(t *testing.T, b Backend) {
	rdb := b.Client(t)
	topic := newTopic(2)
	const n = 300
	publishN(t, rdb, topic, 0, n, 13)
	// A consumer takes every message and dies without acknowledging.
	ctx := context.Background()
	for p := 0; p < topic.Partitions; p++ {
		if err := rdb.XGroupCreateMkStream(ctx, topic.Stream(p), "crash", "0").Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "crash", Consumer: "dead",
			Streams: []string{topic.Stream(p), ">"}, Count: n, Block: -1}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if got := pendingCount(t, rdb, topic, "crash"); got != n {
		t.Fatalf("pending of the dead consumer: %d, want %d", got, n)
	}
	rec := newRecorder()
	start(t, rdb, stream.Stage{Name: "crash", Topic: topic, Config: fastConfig(),
		Handler: func(_ context.Context, m *stream.Message) error {
			rec.call(m)
			rec.ok(m)
			return nil
		}}, stream.Telemetry{})
	rec.waitAll(t, n)
	seen, _, maxAttempt := rec.snapshot()
	for p, c := range seen {
		if c != 1 || maxAttempt[p] != 2 {
			t.Errorf("payload %s: handled %d times at attempt %d; want once at attempt 2", p, c, maxAttempt[p])
		}
	}
	waitPending(t, rdb, topic, "crash", 0)
	AssertConserved(t, rdb, topic, "crash")
}

func testOrderPerPartition(t *testing.T, b Backend) {
	rdb := b.Client(t)
	topic := newTopic(3)
	const n, keys = 1000, 7
	publishN(t, rdb, topic, 0, n, keys)
	rec := newRecorder()
	var lastID = map[int]string{}
	var outOfOrder []string
	start(t, rdb, stream.Stage{Name: "order", Topic: topic, Config: fastConfig(),
		Handler: func(_ context.Context, m *stream.Message) error {
			rec.mu.Lock()
			if prev, ok := lastID[m.Partition]; ok && !idLess(prev, m.ID) {
				outOfOrder = append(outOfOrder, prev+" then "+m.ID)
			}
			lastID[m.Partition] = m.ID
			rec.mu.Unlock()
			rec.ok(m)
			return nil
		}}, stream.Telemetry{})
	rec.waitAll(t, n)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(outOfOrder) > 0 {
		t.Errorf("entries out of order within a partition: %v", outOfOrder)
	}
	for key, payloads := range rec.order {
		for i := 1; i < len(payloads); i++ {
			a, _ := strconv.Atoi(payloads[i-1])
			c, _ := strconv.Atoi(payloads[i])
			if a >= c {
				t.Errorf("key %s: payload %d handled after %d", key, c, a)
			}
		}
	}
}

// idLess compares stream IDs.
func idLess(a, b string) bool {
	am, as := splitID(a)
	bm, bs := splitID(b)
	return am < bm || am == bm && as < bs
}

func splitID(id string) (uint64, uint64) {
	for i := 0; i < len(id); i++ {
		if id[i] == '-' {
			ms, _ := strconv.ParseUint(id[:i], 10, 64)
			seq, _ := strconv.ParseUint(id[i+1:], 10, 64)
			return ms, seq
		}
	}
	return 0, 0
}
