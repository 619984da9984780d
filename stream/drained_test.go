package stream_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

func TestDrained_onceTheGroupAcknowledgedEveryEntry(t *testing.T) {
	ctx := context.Background()
	rdb := dialed(testenv.RedisURL(t))(t)
	topic := stream.NewTopic(randomFlow(), "events", 2)
	if !stream.Drained(ctx, rdb, topic, "g") {
		t.Fatal("empty topic: not drained")
	}
	m := stream.NewMessage("k", "test.event", []byte("x"))
	if err := stream.NewPublisher(rdb, stream.Telemetry{}).Publish(ctx, topic, m); err != nil {
		t.Fatal(err)
	}
	key := topic.Stream(m.Partition)
	steps := []struct {
		name string
		do   func() error
		want bool
	}{
		{"an entry and no group", func() error { return nil }, false},
		{"a group that read nothing", func() error { return rdb.XGroupCreate(ctx, key, "g", "0").Err() }, false},
		{"read, not acknowledged", func() error {
			return rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "c", Streams: []string{key, ">"}, Count: 10}).Err()
		}, false},
		{"acknowledged", func() error { return rdb.XAck(ctx, key, "g", m.ID).Err() }, true},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := stream.Drained(ctx, rdb, topic, "g"); got != s.want {
			t.Errorf("%s: drained %v, want %v", s.name, got, s.want)
		}
	}
}
