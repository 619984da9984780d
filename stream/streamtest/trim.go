package streamtest

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/stream"
)

func testTrimKeepsUnacknowledged(t *testing.T, b Backend) {
	rdb := b.Client(t)
	ctx := context.Background()
	topic := newTopic(1)
	s := topic.Stream(0)
	msgs := publishN(t, rdb, topic, 0, 10, 1)
	later := func() time.Time { return time.Now().Add(2 * time.Hour) }
	trimmer := stream.NewTrimmer(rdb, stream.TrimConfig{MinAge: time.Hour, Now: later}, nil, topic)
	trim := func() int64 {
		t.Helper()
		n, err := trimmer.TrimStream(ctx, s)
		if err != nil {
			t.Fatalf("trim: %v", err)
		}
		return n
	}
	if n := trim(); n != 0 {
		t.Fatalf("trimmed %d entries of a stream without groups", n)
	}
	for _, g := range []string{"fast", "slow"} {
		if err := rdb.XGroupCreate(ctx, s, g, "0").Err(); err != nil {
			t.Fatal(err)
		}
	}
	read := func(group string, count int64) []redis.XMessage {
		res, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: group, Consumer: "c",
			Streams: []string{s, ">"}, Count: count, Block: -1}).Result()
		if err != nil {
			t.Fatal(err)
		}
		return res[0].Messages
	}
	// fast: all delivered, all acked. slow: 6 delivered, entries 3..5 pending.
	for _, m := range read("fast", 10) {
		rdb.XAck(ctx, s, "fast", m.ID)
	}
	for _, m := range read("slow", 6)[:3] {
		rdb.XAck(ctx, s, "slow", m.ID)
	}
	if n := trim(); n != 3 {
		t.Errorf("trimmed %d entries, want 3 (those acked by every group)", n)
	}
	if first := firstID(t, rdb, s); first != msgs[3].ID {
		t.Errorf("first entry after trim %s, want the oldest pending %s", first, msgs[3].ID)
	}
	for _, m := range msgs[3:6] {
		rdb.XAck(ctx, s, "slow", m.ID)
	}
	if n := trim(); n != 3 {
		t.Errorf("trimmed %d entries, want 3 (delivered ones, now acked)", n)
	}
	if first := firstID(t, rdb, s); first != msgs[6].ID {
		t.Errorf("first entry %s, want the first undelivered %s", first, msgs[6].ID)
	}
	// MinAge keeps young entries even when everything is acknowledged.
	for _, m := range read("slow", 10) {
		rdb.XAck(ctx, s, "slow", m.ID)
	}
	keep := stream.NewTrimmer(rdb, stream.TrimConfig{MinAge: time.Hour}, nil, topic)
	if n, err := keep.TrimStream(ctx, s); err != nil || n != 0 {
		t.Errorf("trim with MinAge 1h removed %d (%v), want 0", n, err)
	}
	if n := trim(); n != 4 {
		t.Errorf("trimmed %d, want the last 4", n)
	}
}

func testTrimUngroupedByAgeOnlyWhenAsked(t *testing.T, b Backend) {
	rdb := b.Client(t)
	ctx := context.Background()
	topic := newTopic(1)
	s := topic.Stream(0)
	publishN(t, rdb, topic, 0, 10, 1)
	later := func() time.Time { return time.Now().Add(2 * time.Hour) }
	for _, tc := range []struct {
		name string
		cfg  stream.TrimConfig
		want int64
	}{
		{"young entries stay", stream.TrimConfig{MinAge: time.Hour, Ungrouped: true}, 0},
		{"left alone by default", stream.TrimConfig{MinAge: time.Hour, Now: later}, 0},
		{"old entries go when asked", stream.TrimConfig{MinAge: time.Hour, Now: later, Ungrouped: true}, 10},
	} {
		n, err := stream.NewTrimmer(rdb, tc.cfg, nil, topic).TrimStream(ctx, s)
		if err != nil || n != tc.want {
			t.Errorf("%s: trimmed %d (%v), want %d", tc.name, n, err, tc.want)
		}
	}
	if l := rdb.XLen(ctx, s).Val(); l != 0 {
		t.Errorf("%d entries left, want 0", l)
	}
}

func firstID(t *testing.T, rdb redis.UniversalClient, s string) string {
	t.Helper()
	xs, err := rdb.XRangeN(context.Background(), s, "-", "+", 1).Result()
	if err != nil || len(xs) == 0 {
		t.Fatalf("xrange: %v (%d)", err, len(xs))
	}
	return xs[0].ID
}
