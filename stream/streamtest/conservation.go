package streamtest

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// AssertConserved fails the test unless every entry of topic is accounted
// for in each of the groups: published = acknowledged + dead-lettered +
// dropped + skipped + delayed + requeued + pending + not yet delivered
// (see stream.Conservation). It holds at any instant, stages running or
// not; call it at the end of a test that loses nothing.
func AssertConserved(t testing.TB, rdb redis.UniversalClient, topic stream.Topic, groups ...string) {
	t.Helper()
	ctl := stream.NewControl(rdb)
	for _, g := range groups {
		c, err := ctl.Conservation(context.Background(), topic, g)
		if err != nil {
			t.Errorf("conservation of %s/%s: %v", topic, g, err)
			continue
		}
		if !c.LagKnown || c.Drift != 0 {
			t.Errorf("entries of %s not conserved for group %s: %+v", topic, g, c)
		}
	}
}

// testConservationEveryOutcome settles messages every way there is
// (handled, dropped, dead-lettered at once and after MaxDeliveries,
// replayed, trimmed) and checks each term of the accounting, and that an
// entry trimmed unread behind the Trimmer's back shows as drift.
func testConservationEveryOutcome(t *testing.T, b Backend) {
	rdb := b.Client(t)
	topic := newTopic(2)
	const n = 60
	publishN(t, rdb, topic, 0, n, 6)
	cfg := fastConfig()
	cfg.MaxDeliveries = 2
	var healed = make(chan struct{})
	run := start(t, rdb, stream.Stage{Name: "conserve", Topic: topic, Config: cfg,
		Handler: func(_ context.Context, m *stream.Message) error {
			i, _ := strconv.Atoi(string(m.Payload))
			select {
			case <-healed:
				return nil
			default:
			}
			switch i % 10 {
			case 1:
				return fmt.Errorf("skip: %w", stream.ErrDrop)
			case 2:
				return stream.Permanentf("bad %d", i)
			case 3:
				return errPoison // dead-lettered after 2 deliveries
			}
			return nil
		}}, stream.Telemetry{})
	ctl := stream.NewControl(rdb)
	ctx := context.Background()
	conservation := func() stream.Conservation {
		t.Helper()
		c, err := ctl.Conservation(ctx, topic, "conserve")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	testenv.WaitFor(t, waitTimeout, func() bool {
		c := conservation()
		return c.Acked == n*7/10 && c.DeadLettered == n*2/10 && c.Pending == 0
	}, "messages never all settled")
	c := conservation()
	want := stream.Conservation{Topic: topic.String(), Group: "conserve", Published: n, Acked: n * 7 / 10,
		DeadLettered: n * 2 / 10, Dropped: n / 10, LagKnown: true}
	if c != want {
		t.Fatalf("conservation = %+v\nwant %+v", c, want)
	}

	// Replayed dead letters are published again and handled.
	close(healed)
	if got, err := stream.NewDeadLetters(rdb).Replay(ctx, topic); err != nil || got != n*2/10 {
		t.Fatalf("replay: %d, %v", got, err)
	}
	testenv.WaitFor(t, waitTimeout, func() bool { c := conservation(); return c.Acked == n*9/10 && c.Pending == 0 },
		"replayed dead letters never handled")
	// The Trimmer removes acknowledged entries: they stay counted.
	// Its clock runs a second ahead, so that entries appended in the
	// millisecond of the trim are old enough too.
	ahead := func() time.Time { return time.Now().Add(time.Second) }
	trimmer := stream.NewTrimmer(rdb, stream.TrimConfig{MinAge: time.Nanosecond, Now: ahead}, nil, topic)
	for p := 0; p < topic.Partitions; p++ {
		if _, err := trimmer.TrimStream(ctx, topic.Stream(p)); err != nil {
			t.Fatal(err)
		}
	}
	c = conservation()
	want.Published, want.Acked = n+n*2/10, n*9/10
	if c != want {
		t.Fatalf("after replay and trim: conservation = %+v\nwant %+v", c, want)
	}
	var left int64
	for p := 0; p < topic.Partitions; p++ {
		left += rdb.XLen(ctx, topic.Stream(p)).Val()
	}
	if left != 0 {
		t.Errorf("%d entries left after trimming everything acknowledged", left)
	}
	AssertConserved(t, rdb, topic, "conserve")

	// An entry deleted unread is missing, where the server counts the
	// entries added to a stream.
	if info, err := rdb.XInfoStream(ctx, topic.Stream(0)).Result(); err != nil || info.EntriesAdded == 0 {
		return
	}
	run.stop()
	msgs := publishN(t, rdb, topic, n, 1, 1)
	if err := rdb.XDel(ctx, msgs[0].Stream, msgs[0].ID).Err(); err != nil {
		t.Fatal(err)
	}
	if c := conservation(); c.Drift != 1 {
		t.Errorf("after an unread entry was deleted, drift = %d, want 1 (%+v)", c.Drift, c)
	}
}
