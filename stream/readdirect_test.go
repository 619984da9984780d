package stream_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// TestRunner_acksSurviveAFlushedScriptCache flushes the server's scripts
// while a stage runs: the acknowledgements that go with its next reads
// (EVALSHA of the ack script) meet NOSCRIPT, and must still land, or the
// messages would stay pending and be handled again once claimable.
func TestRunner_acksSurviveAFlushedScriptCache(t *testing.T) {
	for _, b := range testenv.PrivateBackends() {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			rdb := b.Client(t)
			topic := stream.NewTopic("flush"+strconv.FormatInt(time.Now().UnixNano(), 36), "events", 2)
			var mu sync.Mutex
			handled := map[string]int{}
			count := func() (distinct, total int) {
				mu.Lock()
				defer mu.Unlock()
				for _, n := range handled {
					total += n
				}
				return len(handled), total
			}
			r, err := stream.NewRunner(rdb, stream.Stage{Name: "flush", Topic: topic,
				Config: stream.RunnerConfig{BatchSize: 50, Block: 50 * time.Millisecond, ClaimInterval: 25 * time.Millisecond,
					ClaimIdle: 300 * time.Millisecond, HandlerTimeout: 250 * time.Millisecond, Retry: stream.RetryConfig{Disabled: true}},
				Handler: func(_ context.Context, m *stream.Message) error {
					mu.Lock()
					handled[string(m.Payload)]++
					mu.Unlock()
					return nil
				}}, stream.Telemetry{})
			if err != nil {
				t.Fatal(err)
			}
			runCtx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- r.Run(runCtx) }()
			defer func() { cancel(); <-done }()
			pub := stream.NewPublisher(rdb, stream.Telemetry{})
			publish := func(from, n int) {
				msgs := make([]*stream.Message, n)
				for i := range msgs {
					msgs[i] = stream.NewMessage("k"+strconv.Itoa((from+i)%7), "e", []byte(strconv.Itoa(from+i)))
				}
				if err := pub.Publish(ctx, topic, msgs...); err != nil {
					t.Fatal(err)
				}
			}
			const n = 300
			publish(0, n)
			testenv.WaitFor(t, 20*time.Second, func() bool { d, _ := count(); return d == n }, "first messages not handled")
			if err := rdb.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			publish(n, n)
			testenv.WaitFor(t, 20*time.Second, func() bool { d, _ := count(); return d == 2*n }, "messages after the flush not handled")
			testenv.WaitFor(t, 20*time.Second, func() bool {
				pending := int64(0)
				for p := 0; p < topic.Partitions; p++ {
					info, err := rdb.XPending(ctx, topic.Stream(p), "flush").Result()
					if err != nil {
						return false
					}
					pending += info.Count
				}
				return pending == 0
			}, "messages still pending after the flush")
			// Nothing pending means every ack landed, or a lost one's
			// message came back and was handled again: counted here.
			if d, total := count(); d != 2*n || total != 2*n {
				t.Fatalf("handled %d messages %d times, want %d once each", d, total, 2*n)
			}
		})
	}
}
