package streamtest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

var errPoison = errors.New("poison payload")

func testDeadLetterAfterMaxDeliveries(t *testing.T, b Backend) {
	rdb := b.Client(t)
	topic := newTopic(2)
	const n, poison = 100, 42
	publishN(t, rdb, topic, 0, n, 5)
	rec := newRecorder()
	cfg := fastConfig()
	cfg.MaxDeliveries = 3
	start(t, rdb, stream.Stage{Name: "dlq", Topic: topic, Config: cfg,
		Handler: func(_ context.Context, m *stream.Message) error {
			rec.call(m)
			if string(m.Payload) == strconv.Itoa(poison) {
				return errPoison
			}
			rec.ok(m)
			return nil
		}}, stream.Telemetry{})
	rec.waitAll(t, n-1)
	testenv.WaitFor(t, waitTimeout, func() bool { return deadLetterCount(t, rdb, topic) == 1 }, "poison message never dead-lettered")
	waitPending(t, rdb, topic, "dlq", 0)
	_, calls, _ := rec.snapshot()
	if got := calls[strconv.Itoa(poison)]; got != 3 {
		t.Errorf("poison handled %d times, want 3 (MaxDeliveries)", got)
	}
	dls, err := stream.NewDeadLetters(rdb).List(context.Background(), topic, 10)
	if err != nil || len(dls) != 1 {
		t.Fatalf("list dead letters: %v, %d entries", err, len(dls))
	}
	dl := dls[0]
	if string(dl.Message.Payload) != strconv.Itoa(poison) || dl.Stage != "dlq" || dl.Attempts != 3 ||
		!strings.Contains(dl.Reason, errPoison.Error()) || dl.OriginID == "" || dl.At.IsZero() {
		t.Errorf("dead letter = %+v (payload %q), want poison payload, stage dlq, 3 attempts, reason with %q",
			dl, dl.Message.Payload, errPoison)
	}
	AssertConserved(t, rdb, topic, "dlq")
}

func testPermanentAndDrop(t *testing.T, b Backend) {
	rdb := b.Client(t)
	topic := newTopic(1)
	const n = 30
	publishN(t, rdb, topic, 0, n, 3)
	rec := newRecorder()
	start(t, rdb, stream.Stage{Name: "perm", Topic: topic, Config: fastConfig(),
		Handler: func(_ context.Context, m *stream.Message) error {
			rec.call(m)
			i, _ := strconv.Atoi(string(m.Payload))
			switch {
			case i%10 == 1:
				return stream.Permanentf("bad input %d", i)
			case i%10 == 2:
				return fmt.Errorf("skip %d: %w", i, stream.ErrDrop)
			case i%10 == 3:
				panic("handler bug")
			}
			rec.ok(m)
			return nil
		}}, stream.Telemetry{})
	// Permanent: 3 messages at once; panics: 3 messages after 5 deliveries.
	testenv.WaitFor(t, waitTimeout, func() bool { return deadLetterCount(t, rdb, topic) == 6 }, "want 6 dead letters")
	waitPending(t, rdb, topic, "perm", 0)
	seen, calls, _ := rec.snapshot()
	if len(seen) != n-9 {
		t.Errorf("handled %d messages, want %d", len(seen), n-9)
	}
	for i := 0; i < n; i++ {
		want := 1
		if i%10 == 3 {
			want = 5
		}
		if got := calls[strconv.Itoa(i)]; got != want {
			t.Errorf("message %d called %d times, want %d", i, got, want)
		}
	}
	dls, err := stream.NewDeadLetters(rdb).List(context.Background(), topic, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, dl := range dls {
		i, _ := strconv.Atoi(string(dl.Message.Payload))
		switch {
		case i%10 == 1 && (dl.Attempts != 1 || !strings.Contains(dl.Reason, "bad input")):
			t.Errorf("permanent failure %d: attempts %d reason %q", i, dl.Attempts, dl.Reason)
		case i%10 == 3 && (dl.Attempts != 5 || !strings.Contains(dl.Reason, "handler panic")):
			t.Errorf("panic %d: attempts %d reason %q", i, dl.Attempts, dl.Reason)
		case i%10 != 1 && i%10 != 3:
			t.Errorf("message %d dead-lettered: %q", i, dl.Reason)
		}
	}
	AssertConserved(t, rdb, topic, "perm")
}

func testDeadLetterReplayAndPurge(t *testing.T, b Backend) {
	rdb := b.Client(t)
	topic := newTopic(2)
	const n = 40
	publishN(t, rdb, topic, 0, n, 8)
	var healed atomic.Bool
	rec := newRecorder()
	start(t, rdb, stream.Stage{Name: "replay", Topic: topic, Config: fastConfig(),
		Handler: func(_ context.Context, m *stream.Message) error {
			i, _ := strconv.Atoi(string(m.Payload))
			if i%4 == 0 && !healed.Load() {
				return stream.Permanent(errPoison)
			}
			rec.ok(m)
			return nil
		}}, stream.Telemetry{})
	testenv.WaitFor(t, waitTimeout, func() bool { return deadLetterCount(t, rdb, topic) == n/4 }, "want %d dead letters", n/4)
	rec.waitAll(t, n-n/4)
	dlq := stream.NewDeadLetters(rdb)
	ctx := context.Background()
	list, err := dlq.List(ctx, topic, 100)
	if err != nil {
		t.Fatal(err)
	}
	// Purge one by id, replay the rest after the handler is fixed.
	if got, err := dlq.Purge(ctx, topic, list[0].Ref()); err != nil || got != 1 {
		t.Fatalf("purge one: %d, %v", got, err)
	}
	if _, err := dlq.Purge(ctx, topic, list[0].Ref()); !errors.Is(err, stream.ErrNotFound) {
		t.Errorf("purge of a purged id: %v, want ErrNotFound", err)
	}
	healed.Store(true)
	if got, err := dlq.Replay(ctx, topic); err != nil || got != n/4-1 {
		t.Fatalf("replay: %d, %v; want %d", got, err, n/4-1)
	}
	rec.waitAll(t, n-1)
	if got := deadLetterCount(t, rdb, topic); got != 0 {
		t.Errorf("dead letters after replay: %d", got)
	}
	seen, _, _ := rec.snapshot()
	if _, ok := seen[string(list[0].Message.Payload)]; ok {
		t.Errorf("purged message %s was handled", list[0].Message.Payload)
	}
	for p, c := range seen {
		if c != 1 {
			t.Errorf("payload %s handled %d times", p, c)
		}
	}
	AssertConserved(t, rdb, topic, "replay")
}
