package stream_test

import (
	"context"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/rediskey"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/stream/streamtest"
)

// faultLeaseKey is the key of the lease on the fault consumer's name (see
// stream/consumers.go).
func faultLeaseKey(topic stream.Topic, consumer string) string {
	return rediskey.Key(topic.HashTag(0), "consumer", topic.Name, "work", consumer)
}

// handledBy reads, per payload, the messages the processes started with
// tag handled.
func handledBy(t *testing.T, rdb redis.UniversalClient, topic stream.Topic, tag string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for p := 0; p < topic.Partitions; p++ {
		m, err := rdb.HGetAll(context.Background(), "ds:"+topic.HashTag(p)+":fault:by:"+tag).Result()
		if err != nil {
			t.Fatalf("handled by %s: %v", tag, err)
		}
		for k, v := range m {
			n, _ := strconv.Atoi(v)
			out[k] += n
		}
	}
	return out
}

// waitEffects waits until n payloads have their effect.
func waitEffects(t *testing.T, rdb redis.UniversalClient, topic stream.Topic, n int) {
	t.Helper()
	testenv.WaitFor(t, faultWait, func() bool { e, _ := faultState(t, rdb, topic); return len(e) >= n },
		"effects never covered %d messages", n)
}

// TestFault_stalledProcessResumes stops a consumer process with SIGSTOP
// for twice its consumer lease, while messages arrive, and resumes it: the
// process is still alive, takes its expired lease again and reads again
// (no renewal had answered for a lease period, so it read nothing until
// one did), and every message has its effect exactly once.
func TestFault_stalledProcessResumes(t *testing.T) {
	srv := testenv.StartRedis(t, testenv.RedisConfig{})
	rdb, err := stream.Dial(context.Background(), srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	topic := faultTopic(t)
	const lease, n = 2 * time.Second, 600
	proc := startConsumer(t, srv.URL(), topic.Flow, "S", consumerOpts{lease: lease})
	publishRange(t, rdb, topic, 0, n/2)
	waitEffects(t, rdb, topic, n/2)
	stalled := time.Now()
	testenv.Freeze(t, proc.cmd.Process)
	publishRange(t, rdb, topic, n/2, n)
	key := faultLeaseKey(topic, "S")
	testenv.WaitFor(t, faultWait, func() bool { return rdb.Exists(context.Background(), key).Val() == 0 },
		"the stopped process's lease never expired")
	// The stall itself is the fault: it lasts twice the lease.
	time.Sleep(time.Until(stalled.Add(2 * lease)))
	if e, _ := faultState(t, rdb, topic); len(e) != n/2 {
		t.Fatalf("%d effects while the process was stopped, want %d", len(e), n/2)
	}
	resumed := time.Now()
	_ = proc.cmd.Process.Signal(syscall.SIGCONT)
	waitEffects(t, rdb, topic, n)
	t.Logf("stalled %v; every message handled %v after SIGCONT", resumed.Sub(stalled).Round(time.Millisecond),
		time.Since(resumed).Round(time.Millisecond))
	if proc.exited() {
		t.Fatal("the process exited after its stall")
	}
	if !proc.logged("consumer lease had expired with no other holder") {
		t.Error("the process did not log that it took its expired lease again")
	}
	waitPendingZero(t, rdb, topic)
	effects, calls := faultState(t, rdb, topic)
	assertExactlyOnce(t, effects, n, nil)
	t.Logf("%d handler calls for %d messages", sum(calls), n)
	streamtest.AssertConserved(t, rdb, topic, "work")
}

// TestFault_sameNameTwoProcessesOneReads starts two consumer processes
// under one consumer name, as one DROPSTREAM_INSTANCE started twice: the
// later takes the name over at start, the earlier stops reading but keeps
// running (and says why), and handles nothing while the later holds the
// name; once the later stops, the earlier takes the name and reads again.
// Every message has its effect exactly once.
func TestFault_sameNameTwoProcessesOneReads(t *testing.T) {
	srv := testenv.StartRedis(t, testenv.RedisConfig{})
	rdb, err := stream.Dial(context.Background(), srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	topic := faultTopic(t)
	const lease, third = 3 * time.Second, 200
	earlier := startConsumer(t, srv.URL(), topic.Flow, "D", consumerOpts{lease: lease, tag: "earlier"})
	publishRange(t, rdb, topic, 0, third)
	waitEffects(t, rdb, topic, third)
	later := startConsumer(t, srv.URL(), topic.Flow, "D", consumerOpts{lease: lease, tag: "later"})
	testenv.WaitFor(t, faultWait, func() bool {
		return earlier.logged("every partition stopped reading: the consumer name is held by another copy")
	},
		"the earlier process never stopped reading")
	before := len(handledBy(t, rdb, topic, "earlier"))
	publishRange(t, rdb, topic, third, 2*third)
	waitEffects(t, rdb, topic, 2*third)
	if got := len(handledBy(t, rdb, topic, "earlier")); got != before {
		t.Errorf("the earlier process handled %d messages while the later one held the name", got-before)
	}
	if earlier.exited() {
		t.Fatal("the earlier process exited when its consumer name was taken over")
	}
	later.stop()
	testenv.WaitFor(t, faultWait, func() bool { return earlier.logged("consumer name free again") },
		"the earlier process never took its name back")
	publishRange(t, rdb, topic, 2*third, 3*third)
	waitEffects(t, rdb, topic, 3*third)
	by := handledBy(t, rdb, topic, "earlier")
	for i := 2 * third; i < 3*third; i++ {
		if by[strconv.Itoa(i)] != 1 {
			t.Errorf("payload %d handled %d times by the earlier process after the later one stopped, want 1", i, by[strconv.Itoa(i)])
		}
	}
	if earlier.exited() {
		t.Fatal("the earlier process exited")
	}
	waitPendingZero(t, rdb, topic)
	effects, _ := faultState(t, rdb, topic)
	assertExactlyOnce(t, effects, 3*third, nil)
	streamtest.AssertConserved(t, rdb, topic, "work")
}
