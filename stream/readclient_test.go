package stream_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// TestRunner_blockingReadsDoNotStarveTheSharedPool runs many stages of
// many partitions (24 reads blocked at once) on a client whose pool has two
// connections, with handlers that use that client: every message is
// handled, and no command waited out the pool's timeout. With the reads on
// the shared pool they would hold every connection for a Block each, and
// handlers and reads alike would time out waiting for one.
func TestRunner_blockingReadsDoNotStarveTheSharedPool(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			opt := *b.Client(t).(*redis.Client).Options()
			opt.PoolSize, opt.PoolTimeout = 2, 500*time.Millisecond
			rdb := redis.NewClient(&opt)
			t.Cleanup(func() { _ = rdb.Close() })
			ctx, cancel := context.WithCancel(context.Background())
			const stages, partitions, perStage = 6, 4, 40
			var handled atomic.Int64
			done := make(chan struct{}, stages)
			flow := "starve" + strconv.FormatInt(time.Now().UnixNano(), 36)
			var topics []stream.Topic
			for i := range stages {
				topic := stream.NewTopic(flow, "t"+strconv.Itoa(i), partitions)
				topics = append(topics, topic)
				r, err := stream.NewRunner(rdb, stream.Stage{Name: "s" + strconv.Itoa(i), Topic: topic,
					Config: stream.RunnerConfig{Block: 2 * time.Second, ErrorBackoff: 100 * time.Millisecond},
					Handler: func(ctx context.Context, m *stream.Message) error {
						if err := rdb.Incr(ctx, flow+":count").Err(); err != nil {
							return err
						}
						handled.Add(1)
						return nil
					}}, stream.Telemetry{})
				if err != nil {
					t.Fatal(err)
				}
				go func() { _ = r.Run(ctx); done <- struct{}{} }()
			}
			t.Cleanup(func() {
				cancel()
				for range stages {
					<-done
				}
			})
			pub := stream.NewPublisher(rdb, stream.Telemetry{})
			for _, topic := range topics {
				var msgs []*stream.Message
				for j := range perStage {
					msgs = append(msgs, stream.NewMessage("k"+strconv.Itoa(j), "t", []byte("x")))
				}
				if err := pub.Publish(ctx, topic, msgs...); err != nil {
					t.Fatal(err)
				}
			}
			testenv.WaitFor(t, 60*time.Second, func() bool { return handled.Load() == stages*perStage },
				"every message handled")
			if n, err := rdb.Get(ctx, flow+":count").Int(); err != nil || n != stages*perStage {
				t.Errorf("handlers counted %d, %v; want %d", n, err, stages*perStage)
			}
			if st := rdb.PoolStats(); st.Timeouts != 0 {
				t.Errorf("%d commands timed out waiting for a pooled connection (pool stats %+v)", st.Timeouts, *st)
			}
		})
	}
}
