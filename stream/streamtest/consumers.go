package streamtest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// consumers returns the names of the group's consumers on partition p.
func consumers(t *testing.T, rdb redis.UniversalClient, topic stream.Topic, p int, group string) map[string]int64 {
	t.Helper()
	cs, err := rdb.XInfoConsumers(context.Background(), topic.Stream(p), group).Result()
	if err != nil {
		t.Fatalf("xinfo consumers: %v", err)
	}
	out := map[string]int64{}
	for _, c := range cs {
		out[c.Name] = c.Pending
	}
	return out
}

// testRestartConsumersBounded: a stage restarted 100 times, under a stable
// instance id or with a new name each time, leaves at most one consumer in
// its group, and handles every message exactly once.
func testRestartConsumersBounded(t *testing.T, b Backend) {
	for _, instance := range []string{"node-a", ""} {
		t.Run("instance="+instance, func(t *testing.T) {
			rdb := b.Client(t)
			topic := newTopic(1)
			const restarts, per = 100, 5
			cfg := fastConfig()
			cfg.Instance = instance
			rec := newRecorder()
			stage := stream.Stage{Name: "restarts", Topic: topic, Config: cfg,
				Handler: func(_ context.Context, m *stream.Message) error {
					rec.ok(m)
					return nil
				}}
			names := map[string]bool{}
			for i := 0; i < restarts; i++ {
				publishN(t, rdb, topic, i*per, per, 3)
				run := start(t, rdb, stage, stream.Telemetry{})
				names[run.runner.Info().Consumer] = true
				rec.waitAll(t, (i+1)*per)
				run.stop()
				if cs := consumers(t, rdb, topic, 0, "restarts"); len(cs) > 1 {
					t.Fatalf("after restart %d the group has %d consumers: %v", i+1, len(cs), cs)
				}
			}
			wantNames := restarts
			if instance != "" {
				wantNames = 1
			}
			if len(names) != wantNames {
				t.Errorf("%d restarts used %d consumer names, want %d", restarts, len(names), wantNames)
			}
			seen, _, _ := rec.snapshot()
			if len(seen) != restarts*per {
				t.Errorf("handled %d distinct messages, want %d", len(seen), restarts*per)
			}
			for p, c := range seen {
				if c != 1 {
					t.Errorf("payload %s handled %d times", p, c)
				}
			}
			waitPending(t, rdb, topic, "restarts", 0)
		})
	}
}

// testRestartInstanceOwnPending: a copy stopped in the middle of its batch
// leaves the rest pending; restarted under the same instance id it handles
// them first, before newer messages, each exactly once.
func testRestartInstanceOwnPending(t *testing.T, b Backend) {
	rdb := b.Client(t)
	topic := newTopic(1)
	const n = 50
	publishN(t, rdb, topic, 0, n, 1)
	cfg := fastConfig()
	cfg.Instance = "node-b"
	cfg.ClaimIdle = time.Hour // only reading its own pending entries recovers them
	cfg.HandlerTimeout = time.Second
	rec := newRecorder()
	entered, stopped := make(chan struct{}), make(chan struct{})
	first := start(t, rdb, stream.Stage{Name: "ownpend", Topic: topic, Config: cfg,
		Handler: func(ctx context.Context, m *stream.Message) error {
			if string(m.Payload) == "0" {
				close(entered)
			}
			select {
			case <-stopped: // after stop every message runs until the drain ends it: left pending
				<-ctx.Done()
				return ctx.Err()
			default:
			}
			if string(m.Payload) == "0" {
				<-stopped
				<-ctx.Done()
				return ctx.Err()
			}
			rec.ok(m)
			return nil
		}}, stream.Telemetry{})
	<-entered
	first.cancel()
	close(stopped)
	waitDone(t, first, "stopped mid-batch")
	if got := pendingCount(t, rdb, topic, "ownpend"); got == 0 {
		t.Fatal("nothing left pending by a copy stopped mid-batch")
	}
	publishN(t, rdb, topic, n, n, 1)
	var order []int
	second := start(t, rdb, stream.Stage{Name: "ownpend", Topic: topic, Config: cfg,
		Handler: func(_ context.Context, m *stream.Message) error {
			i, _ := strconv.Atoi(string(m.Payload))
			rec.mu.Lock()
			order = append(order, i)
			rec.mu.Unlock()
			rec.ok(m)
			return nil
		}}, stream.Telemetry{})
	rec.waitAll(t, 2*n)
	if got, want := second.runner.Info().Consumer, first.runner.Info().Consumer; got != want {
		t.Errorf("restarted copy named %q, want %q", got, want)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if !slices.IsSorted(order) {
		t.Errorf("restarted copy handled %v: newer messages before its own pending ones", order)
	}
	for p, c := range rec.seen {
		if c != 1 {
			t.Errorf("payload %s handled %d times", p, c)
		}
	}
}

// testConsumersIdleDeleted: consumers left by copies that are gone are
// deleted once idle with nothing pending; one with pending entries stays,
// its entries intact.
func testConsumersIdleDeleted(t *testing.T, b Backend) {
	if !b.Features.IdleTimes {
		t.Skip("the backend reports no idle times of consumers")
	}
	rdb := b.Client(t)
	topic := newTopic(1)
	ctx := context.Background()
	stream0 := topic.Stream(0)
	if err := rdb.XGroupCreateMkStream(ctx, stream0, "ghosts", "0").Err(); err != nil {
		t.Fatal(err)
	}
	const ghosts = 20
	for i := 0; i < ghosts; i++ {
		publishN(t, rdb, topic, i, 1, 1)
		res, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "ghosts", Consumer: "gone-" + strconv.Itoa(i),
			Streams: []string{stream0, ">"}, Count: 1, Block: -1}).Result()
		if err != nil {
			t.Fatal(err)
		}
		if err := rdb.XAck(ctx, stream0, "ghosts", res[0].Messages[0].ID).Err(); err != nil {
			t.Fatal(err)
		}
	}
	publishN(t, rdb, topic, ghosts, 3, 1)
	readAsDead(t, rdb, topic, "ghosts-unused", "x") // another group is left alone
	if err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "ghosts", Consumer: "crashed",
		Streams: []string{stream0, ">"}, Count: 3, Block: -1}).Err(); err != nil {
		t.Fatal(err)
	}
	cfg := fastConfig()
	cfg.ClaimIdle = time.Hour // the crashed consumer's entries stay its own
	cfg.ConsumerIdle = 200 * time.Millisecond
	run := start(t, rdb, stream.Stage{Name: "ghosts", Topic: topic, Config: cfg,
		Handler: func(context.Context, *stream.Message) error { return nil }}, stream.Telemetry{})
	live := run.runner.Info().Consumer
	gone := func() bool {
		for name := range consumers(t, rdb, topic, 0, "ghosts") {
			if strings.HasPrefix(name, "gone-") {
				return false
			}
		}
		return true
	}
	testenv.WaitFor(t, waitTimeout, gone,
		"idle consumers with nothing pending were not deleted: %v", lazyConsumers{t, rdb, topic, "ghosts"})
	cs := consumers(t, rdb, topic, 0, "ghosts")
	if cs["crashed"] != 3 {
		t.Errorf("consumer with pending entries: %v, want it kept with its 3 entries", cs)
	}
	delete(cs, live) // a live copy blocked in a read of nothing may not be listed yet
	if len(cs) != 1 {
		t.Errorf("consumers left: %v, want only the crashed one and the live copy", cs)
	}
	if got := pendingCount(t, rdb, topic, "ghosts"); got != 3 {
		t.Errorf("pending %d, want the crashed consumer's 3", got)
	}
	if n := len(consumers(t, rdb, topic, 0, "ghosts-unused")); n != 1 {
		t.Errorf("another group has %d consumers, want its 1", n)
	}
}

// lazyConsumers prints the consumers of a group when formatted.
type lazyConsumers struct {
	t     *testing.T
	rdb   redis.UniversalClient
	topic stream.Topic
	group string
}

func (l lazyConsumers) String() string {
	return fmt.Sprint(consumers(l.t, l.rdb, l.topic, 0, l.group))
}
