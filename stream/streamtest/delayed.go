package streamtest

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

var errNotYet = errors.New("not yet")

// testDelayedRetryDoesNotBlock: a message retried after a delay waits
// aside while the rest of its partition flows; it comes back once per
// retry with its delivery count, and succeeds once. Another group of the
// same topic handles every message exactly once, never the retries.
func testDelayedRetryDoesNotBlock(t *testing.T, b Backend) {
	rdb := b.Client(t)
	topic := newTopic(1)
	const n, delay = 20, 300 * time.Millisecond
	var (
		mu       sync.Mutex
		order    []string // successes, in order
		attempts []int    // deliveries of message 0
		began    time.Time
		took     time.Duration
	)
	cfg := fastConfig()
	cfg.Block = 20 * time.Millisecond
	start(t, rdb, stream.Stage{Name: "delayed", Topic: topic, Config: cfg,
		Handler: func(_ context.Context, m *stream.Message) error {
			mu.Lock()
			defer mu.Unlock()
			if string(m.Payload) == "0" {
				if len(attempts) == 0 {
					began = time.Now()
				}
				attempts = append(attempts, m.Attempt)
				if len(attempts) < 3 {
					return stream.RetryAfter(errNotYet, delay)
				}
				took = time.Since(began)
			}
			order = append(order, string(m.Payload))
			return nil
		}}, stream.Telemetry{})
	other := newRecorder()
	start(t, rdb, stream.Stage{Name: "other", Topic: topic, Config: fastConfig(),
		Handler: func(_ context.Context, m *stream.Message) error {
			other.ok(m)
			return nil
		}}, stream.Telemetry{})
	publishN(t, rdb, topic, 0, n, 1) // one key: one partition, in order
	testenv.WaitFor(t, waitTimeout, func() bool { mu.Lock(); defer mu.Unlock(); return len(order) == n },
		"the delayed message never succeeded")
	mu.Lock()
	defer mu.Unlock()
	if order[n-1] != "0" {
		t.Errorf("order of successes %v: the messages after the delayed one waited for it", order)
	}
	if want := []int{1, 2, 3}; !slices.Equal(attempts, want) {
		t.Errorf("delayed message delivered at attempts %v, want %v", attempts, want)
	}
	if took < 2*delay {
		t.Errorf("two retries after %s came back in %s", delay, took)
	}
	other.waitAll(t, n)
	waitPending(t, rdb, topic, "delayed", 0)
	waitPending(t, rdb, topic, "other", 0)
	seen, _, _ := other.snapshot()
	for p, c := range seen {
		if c != 1 {
			t.Errorf("group other handled %s %d times: it must skip the delayed retries of group delayed", p, c)
		}
	}
	// The last retry is published as the delayed message succeeds: group
	// other may not have read it yet.
	var c stream.Conservation
	var err error
	testenv.WaitFor(t, waitTimeout, func() bool {
		c, err = stream.NewControl(rdb).Conservation(context.Background(), topic, "other")
		return err != nil || c.LagKnown && c.Lag == 0
	}, "group other never read every entry")
	if err != nil || c.Skipped != 2 || c.Acked != n {
		t.Errorf("group other: %+v (%v); want %d acked and the 2 retries skipped", c, err, n)
	}
	c, err = stream.NewControl(rdb).Conservation(context.Background(), topic, "delayed")
	if err != nil || c.Requeued != 2 || c.Delayed != 0 || c.Acked != n || c.Published != n+2 {
		t.Errorf("group delayed: %+v (%v); want %d acked, 2 requeued, %d published", c, err, n, n+2)
	}
	AssertConserved(t, rdb, topic, "delayed", "other")
}

// testDelayedRetryDeadLettersAtMaxDeliveries: a message that keeps asking
// for a delayed retry is dead-lettered at its last allowed delivery;
// while it waits it counts as delayed.
func testDelayedRetryDeadLettersAtMaxDeliveries(t *testing.T, b Backend) {
	rdb := b.Client(t)
	topic := newTopic(2)
	cfg := fastConfig()
	cfg.MaxDeliveries = 3
	var calls sync.Map
	start(t, rdb, stream.Stage{Name: "forever", Topic: topic, Config: cfg,
		Handler: func(_ context.Context, m *stream.Message) error {
			n, _ := calls.LoadOrStore(string(m.Payload), new(int))
			*n.(*int)++
			return stream.RetryAfter(errNotYet, 100*time.Millisecond)
		}}, stream.Telemetry{})
	const n = 4
	publishN(t, rdb, topic, 0, n, 4)
	ctl := stream.NewControl(rdb)
	sawDelayed := false
	testenv.WaitFor(t, waitTimeout, func() bool {
		c, err := ctl.Conservation(context.Background(), topic, "forever")
		sawDelayed = sawDelayed || (err == nil && c.Delayed > 0 && c.Drift == 0)
		return deadLetterCount(t, rdb, topic) == n
	}, "messages retried forever never dead-lettered")
	if !sawDelayed {
		t.Error("the accounting never showed a parked message as delayed")
	}
	dls, err := stream.NewDeadLetters(rdb).List(context.Background(), topic, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, dl := range dls {
		if dl.Attempts != 3 || !strings.Contains(dl.Reason, errNotYet.Error()) || dl.Message.Metadata[stream.MetaRetryGroup] != "forever" {
			t.Errorf("dead letter %s: attempts %d, reason %q, metadata %v; want 3 attempts of a delayed retry",
				dl.Message.Payload, dl.Attempts, dl.Reason, dl.Message.Metadata)
		}
	}
	for i := 0; i < n; i++ {
		if c, _ := calls.Load(strconv.Itoa(i)); c == nil || *c.(*int) != 3 {
			t.Errorf("message %d handled %v times, want 3", i, c)
		}
	}
	waitPending(t, rdb, topic, "forever", 0)
	AssertConserved(t, rdb, topic, "forever")
}
