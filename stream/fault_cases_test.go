package stream_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/stream/streamtest"
)

const faultWait = 60 * time.Second

// TestFault_consumerKilledMidBatch kills -9 a consumer process holding a
// batch; another copy claims the entries and finishes them, and every
// effect is applied exactly once.
func TestFault_consumerKilledMidBatch(t *testing.T) {
	srv := testenv.StartRedis(t, testenv.RedisConfig{})
	rdb, err := stream.Dial(context.Background(), srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	topic := faultTopic(t)
	const n = 1500
	publishRange(t, rdb, topic, 0, n)
	a := startConsumer(t, srv.URL(), topic.Flow, "A", consumerOpts{delay: time.Millisecond, stall: "700"})
	testenv.WaitFor(t, faultWait, func() bool { _, calls := faultState(t, rdb, topic); return calls["700"] == 1 },
		"consumer A never reached the stalling message")
	a.kill()
	pend, err := rdb.XPending(context.Background(), topic.Stream(topic.Partition("k"+strconv.Itoa(700%17))), "work").Result()
	if err != nil || pend.Consumers["A"] == 0 {
		t.Fatalf("after kill -9, consumer A holds %v pending entries (%v); want a batch in hand", pend, err)
	}
	startConsumer(t, srv.URL(), topic.Flow, "B", consumerOpts{})
	testenv.WaitFor(t, faultWait, func() bool { e, _ := faultState(t, rdb, topic); return sum(e) >= n },
		"effects never reached %d", n)
	waitPendingZero(t, rdb, topic)
	effects, calls := faultState(t, rdb, topic)
	assertExactlyOnce(t, effects, n, nil)
	if calls["700"] != 2 {
		t.Errorf("stalled message handled %d times, want 2 (A, then B after the claim)", calls["700"])
	}
	streamtest.AssertConserved(t, rdb, topic, "work")
}

// TestFault_redisKilledAndRestarted kills -9 redis-server while a consumer
// process works and the test publishes, restarts it from its AOF, and checks
// that the consumer reconnects, no acknowledged message is lost and none is
// applied twice.
//
// The AOF uses appendfsync always. With everysec, Redis may postpone the
// AOF write for up to 2 s while a background fsync is slow and still reply
// to clients, so a kill -9 on a loaded machine loses acknowledged writes —
// seen in this test under CI load, where the consumer group itself was lost.
// "Nothing lost" on a crash needs appendfsync always (see README).
func TestFault_redisKilledAndRestarted(t *testing.T) {
	srv := testenv.StartRedis(t, testenv.RedisConfig{AppendOnly: true, AppendFsync: "always"})
	t.Cleanup(func() {
		if t.Failed() {
			logTail, _ := os.ReadFile(filepath.Join(srv.Dir(), "redis.log"))
			t.Logf("redis-server log:\n%s", logTail)
		}
	})
	rdb, err := stream.Dial(context.Background(), srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	topic := faultTopic(t)
	c := startConsumer(t, srv.URL(), topic.Flow, "C", consumerOpts{delay: 200 * time.Microsecond})
	pub := stream.NewPublisher(rdb, stream.Telemetry{})
	const n, chunk = 3000, 20
	failed := 0
	for i := 0; i < n; i += chunk {
		if i == n/3 {
			srv.Kill()
			srv.Restart(t)
		}
		for {
			msgs := make([]*stream.Message, 0, chunk)
			for j := i; j < i+chunk; j++ {
				msgs = append(msgs, stream.NewMessage("k"+strconv.Itoa(j%17), "fault", []byte(strconv.Itoa(j))))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			err := pub.Publish(ctx, topic, msgs...)
			cancel()
			if err == nil {
				break // acknowledged: it must not be lost
			}
			failed++
			if failed > 200 {
				t.Fatalf("publishing never recovered: %v", err)
			}
		}
	}
	testenv.WaitFor(t, faultWait, func() bool { e, _ := faultState(t, rdb, topic); return len(e) >= n },
		"effects never covered all %d acknowledged messages", n)
	waitPendingZero(t, rdb, topic)
	effects, _ := faultState(t, rdb, topic)
	assertExactlyOnce(t, effects, n, nil)
	if c.exited() {
		t.Error("the consumer process exited instead of reconnecting")
	}
	streamtest.AssertConserved(t, rdb, topic, "work")
}

// TestFault_poisonCrashesConsumer runs a consumer that a poison message
// kills every time; the supervisor restarts it, and after MaxDeliveries the
// poison goes to the dead-letter stream while the rest flow on.
func TestFault_poisonCrashesConsumer(t *testing.T) {
	srv := testenv.StartRedis(t, testenv.RedisConfig{})
	rdb, err := stream.Dial(context.Background(), srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	topic := faultTopic(t)
	const n, poison = 400, "77"
	publishRange(t, rdb, topic, 0, n)
	restarts := 0
	proc := startConsumer(t, srv.URL(), topic.Flow, "P", consumerOpts{poison: poison})
	dlq := stream.NewDeadLetters(rdb)
	testenv.WaitFor(t, faultWait, func() bool {
		if proc.exited() {
			if restarts++; restarts > 10 {
				return true
			}
			proc = startConsumer(t, srv.URL(), topic.Flow, "P", consumerOpts{poison: poison})
		}
		dead, _ := dlq.Count(context.Background(), topic)
		e, _ := faultState(t, rdb, topic)
		return dead == 1 && sum(e) == n-1
	}, "poison never dead-lettered while the rest flowed")
	if restarts != 3 {
		t.Errorf("consumer restarted %d times, want 3 (one crash per allowed delivery)", restarts)
	}
	if proc.exited() {
		t.Error("consumer still crashing after the poison was dead-lettered")
	}
	list, err := dlq.List(context.Background(), topic, 10)
	if err != nil || len(list) != 1 {
		t.Fatalf("dead letters: %v, %v", list, err)
	}
	if dl := list[0]; string(dl.Message.Payload) != poison || dl.Attempts != 4 || !strings.Contains(dl.Reason, stream.ErrMaxDeliveries.Error()) {
		t.Errorf("dead letter %q attempts %d reason %q; want the poison, 4, max deliveries", dl.Message.Payload, dl.Attempts, dl.Reason)
	}
	effects, _ := faultState(t, rdb, topic)
	assertExactlyOnce(t, effects, n, map[string]bool{poison: true})
	waitPendingZero(t, rdb, topic)
	streamtest.AssertConserved(t, rdb, topic, "work")
}

// waitPendingZero waits until the "work" group has no pending entries.
func waitPendingZero(t *testing.T, rdb redis.UniversalClient, topic stream.Topic) {
	t.Helper()
	testenv.WaitFor(t, faultWait, func() bool {
		for p := 0; p < topic.Partitions; p++ {
			sum, err := rdb.XPending(context.Background(), topic.Stream(p), "work").Result()
			if err != nil || sum.Count > 0 {
				return false
			}
		}
		return true
	}, "pending entries never drained")
}
