package streamtest

import (
	"context"
	"strconv"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/dropstream/dropstream/stream"
)

// testPublishAllManyTopics publishes to two topics in one PublishAll call,
// more messages than one round trip carries: every message is appended
// once, to its own topic's partition of its key, with its ID set, and each
// topic gets its own send span.
func testPublishAllManyTopics(t *testing.T, b Backend) {
	ctx := context.Background()
	rdb := b.Client(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	pub := stream.NewPublisher(rdb, stream.Telemetry{TracerProvider: tp})
	first, second := newTopic(4), newTopic(4)
	// 700 + 400 messages: the call's round trips carry 500, so one of them
	// holds entries of both topics.
	batches := []stream.Batch{{Topic: first}, {Topic: second}}
	for i := range 700 {
		batches[0].Messages = append(batches[0].Messages, stream.NewMessage("a"+strconv.Itoa(i%37), "t", []byte(strconv.Itoa(i))))
	}
	for i := range 400 {
		batches[1].Messages = append(batches[1].Messages, stream.NewMessage("b"+strconv.Itoa(i%23), "t", []byte(strconv.Itoa(i))))
	}
	if err := pub.PublishAll(ctx, batches...); err != nil {
		t.Fatal(err)
	}
	for _, bt := range batches {
		want := map[string]string{} // stream and id -> payload
		for _, m := range bt.Messages {
			if m.ID == "" || m.Stream != bt.Topic.Stream(bt.Topic.Partition(m.Key)) {
				t.Fatalf("message %s of %s: id %q stream %q", m.Payload, bt.Topic, m.ID, m.Stream)
			}
			want[m.Stream+" "+m.ID] = string(m.Payload)
		}
		got := 0
		for p := range bt.Topic.Partitions {
			xs, err := rdb.XRange(ctx, bt.Topic.Stream(p), "-", "+").Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range xs {
				if payload, ok := want[bt.Topic.Stream(p)+" "+x.ID]; !ok || x.Values["payload"] != payload {
					t.Errorf("%s: entry %s %v not one of the messages sent", bt.Topic, x.ID, x.Values)
				}
				got++
			}
		}
		if got != len(bt.Messages) {
			t.Errorf("%s holds %d entries, want %d", bt.Topic, got, len(bt.Messages))
		}
	}
	spans := map[string]int{}
	for _, s := range rec.Ended() {
		spans[s.Name()]++
	}
	if spans["send "+first.String()] != 1 || spans["send "+second.String()] != 1 {
		t.Errorf("send spans %v, want one per topic", spans)
	}
}
