package streamtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dropstream/dropstream/internal/rediskey"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// leaseKey is the key of the lease on a copy's consumer name (see
// stream/consumers.go).
func leaseKey(topic stream.Topic, info stream.StageInfo) string {
	return rediskey.Key(topic.HashTag(0), "consumer", topic.Name, info.Group, info.Consumer)
}

// recording is a stage whose handler records every message in rec.
func recording(name string, topic stream.Topic, cfg stream.RunnerConfig, rec *recorder) stream.Stage {
	return stream.Stage{Name: name, Topic: topic, Config: cfg,
		Handler: func(_ context.Context, m *stream.Message) error {
			rec.ok(m)
			return nil
		}}
}

// stillRuns fails the test if the copy's Run has returned.
func stillRuns(t *testing.T, run *running, what string) {
	t.Helper()
	select {
	case err := <-run.done:
		run.done <- err
		t.Fatalf("%s: Run returned %v, want it still running", what, err)
	default:
	}
}

// testConsumerHeldByAnother: a copy started under the consumer name of a
// live copy takes it over; the older copy stops reading (it handles
// nothing published while the other holds the name) but keeps running,
// and reads again once the newer copy is gone. Every message is handled
// exactly once.
func testConsumerHeldByAnother(t *testing.T, b Backend) {
	rdb := b.Client(t)
	topic := newTopic(2)
	cfg := fastConfig()
	cfg.Instance = "node-c"
	cfg.ConsumerLease = 300 * time.Millisecond
	older, newer := newRecorder(), newRecorder()
	first := start(t, rdb, recording("takeover", topic, cfg, older), stream.Telemetry{})
	publishN(t, rdb, topic, 0, 20, 5)
	older.waitAll(t, 20)
	waitPending(t, rdb, topic, "takeover", 0) // acks queued for the next read are out: the newer copy redelivers nothing
	second := start(t, rdb, recording("takeover", topic, cfg, newer), stream.Telemetry{})
	<-second.runner.Started()
	testenv.WaitFor(t, waitTimeout, func() bool { return errors.Is(first.runner.LeaseErr(), stream.ErrConsumerTaken) },
		"the older copy never saw its consumer name held by the newer copy")
	if err := second.runner.LeaseErr(); err != nil {
		t.Fatalf("newer copy's LeaseErr = %v, want nil", err)
	}
	before := older.distinct()
	publishN(t, rdb, topic, 20, 50, 5)
	newer.waitAll(t, 50)
	if got := older.distinct(); got != before {
		t.Errorf("older copy handled %d messages while the newer copy held its name", got-before)
	}
	stillRuns(t, first, "older copy while its name is held")
	second.stop()
	testenv.WaitFor(t, waitTimeout, func() bool { return first.runner.LeaseErr() == nil },
		"the older copy never took its name back from the stopped newer copy")
	publishN(t, rdb, topic, 70, 30, 5)
	older.waitAll(t, before+30)
	stillRuns(t, first, "older copy after the newer one stopped")
	assertOnceAcross(t, 100, older, newer)
	waitPending(t, rdb, topic, "takeover", 0)
}

// testLeaseExpiredTakenAgain: a lease that expires while no other copy
// holds the name (here: deleted, as a stall past the lease leaves it) is
// taken again; the copy keeps reading, and every message is handled
// exactly once.
func testLeaseExpiredTakenAgain(t *testing.T, b Backend) {
	rdb := b.Client(t)
	topic := newTopic(2)
	cfg := fastConfig()
	cfg.Instance = "node-e"
	cfg.ConsumerLease = 300 * time.Millisecond
	rec := newRecorder()
	run := start(t, rdb, recording("expiry", topic, cfg, rec), stream.Telemetry{})
	<-run.runner.Started()
	ctx := context.Background()
	key := leaseKey(topic, run.runner.Info())
	publishN(t, rdb, topic, 0, 20, 5)
	rec.waitAll(t, 20)
	for round := range 3 {
		token, err := rdb.Get(ctx, key).Result()
		if err != nil {
			t.Fatalf("round %d: the copy's lease %s: %v", round, key, err)
		}
		if err := rdb.Del(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, waitTimeout, func() bool { return rdb.Get(ctx, key).Val() == token },
			"round %d: the expired lease was not taken again by its copy", round)
		publishN(t, rdb, topic, 20+round*30, 30, 5)
		rec.waitAll(t, 20+(round+1)*30)
		stillRuns(t, run, "copy whose lease expired")
		if err := run.runner.LeaseErr(); err != nil {
			t.Fatalf("round %d: LeaseErr = %v, want nil", round, err)
		}
	}
	assertOnceAcross(t, 110, rec)
	waitPending(t, rdb, topic, "expiry", 0)
}

// assertOnceAcross checks that payloads 0..n-1 were each handled exactly
// once by the recorders together.
func assertOnceAcross(t *testing.T, n int, recs ...*recorder) {
	t.Helper()
	total := map[string]int{}
	for _, r := range recs {
		seen, _, _ := r.snapshot()
		for p, c := range seen {
			total[p] += c
		}
	}
	if len(total) != n {
		t.Errorf("handled %d distinct messages, want %d", len(total), n)
	}
	for p, c := range total {
		if c != 1 {
			t.Errorf("payload %s handled %d times", p, c)
		}
	}
}
