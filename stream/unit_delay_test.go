package stream

import (
	"context"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

func TestRequeue_restoresEveryFieldByteForByte(t *testing.T) {
	srv := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	topic := NewTopic("unit", "events", 1)
	m := &Message{Key: "k:1", Type: "t", Payload: []byte("12:ab\x00\xff::\n"),
		Metadata: map[string]string{MetaRetryGroup: "g", MetaRetryAttempts: "2", "empty": ""}}
	if err := rdb.ZAdd(ctx, topic.delayedKey(0, "g"), redis.Z{Score: 1, Member: encodeParked(m.values())}).Err(); err != nil {
		t.Fatal(err)
	}
	keys := []string{topic.delayedKey(0, "g"), topic.Stream(0), topic.groupCountsKey(0, "g")}
	res, err := requeueScript.Run(ctx, rdb, keys, 5, 10).Int64Slice()
	if err != nil || len(res) != 2 || res[0] != 1 || res[1] != -1 {
		t.Fatalf("requeue = %v, %v; want 1 moved and none left", res, err)
	}
	xs, err := rdb.XRange(ctx, topic.Stream(0), "-", "+").Result()
	if err != nil || len(xs) != 1 {
		t.Fatalf("stream: %v, %v", xs, err)
	}
	got := decodeMessage(topic.Stream(0), 0, xs[0].ID, xs[0].Values)
	if got.Key != m.Key || string(got.Payload) != string(m.Payload) || got.Metadata["empty"] != "" || len(got.Metadata) != 3 || got.Attempt != 3 {
		t.Errorf("requeued %+v (payload %q), want %+v at attempt 3", got, got.Payload, m)
	}
	if again, _ := requeueScript.Run(ctx, rdb, keys, 5, 10).Int64Slice(); again[0] != 0 {
		t.Errorf("second requeue moved %d, want 0: each parked message goes back once", again[0])
	}
}
