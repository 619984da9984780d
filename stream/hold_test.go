package stream_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dropstream/dropstream/internal/telemetrytest"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// TestBatchHandler_heldBatchStaysInHandUntilTheSinkAnswers: a batch handler
// that returns stream.Hold (its sink is down) past its timeout is called
// again with the same messages, on the same delivery, until it succeeds;
// they are then acknowledged, long before ClaimIdle, without a dead letter
// (MaxDeliveries is 1) or a warning per message. Stopped while the sink is
// still down, the runner leaves the held messages pending, in one log line.
func TestBatchHandler_heldBatchStaysInHandUntilTheSinkAnswers(t *testing.T) {
	tests := []struct {
		name     string
		recovers bool
	}{
		{name: "the sink answers again", recovers: true},
		{name: "stopped while the sink is down", recovers: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rdb, _, _, topic := observed(t, "hold", 1)
			pub := stream.NewPublisher(rdb, stream.Telemetry{})
			const n = 10
			var msgs []*stream.Message
			for i := range n {
				msgs = append(msgs, stream.NewMessage("k", "t", []byte(strconv.Itoa(i))))
			}
			if err := pub.Publish(t.Context(), topic, msgs...); err != nil {
				t.Fatal(err)
			}
			var down atomic.Bool
			down.Store(true)
			var calls, later atomic.Int64 // later: messages handed over on a delivery after the first
			handled := map[string]int{}
			var mu sync.Mutex
			logs := &telemetrytest.Logs{}
			stage := stream.Stage{Name: "held", Topic: topic,
				Config: stream.RunnerConfig{Block: 20 * time.Millisecond, BatchSize: n, HandlerTimeout: 100 * time.Millisecond,
					ClaimIdle: 10 * time.Minute, MaxDeliveries: 1, ErrorBackoff: 50 * time.Millisecond, Retry: stream.RetryConfig{Disabled: true}},
				BatchHandler: func(ctx context.Context, batch []*stream.Message) error {
					calls.Add(1)
					for _, m := range batch {
						if m.Attempt != 1 {
							later.Add(1)
						}
					}
					if down.Load() {
						<-ctx.Done() // the sink does not answer within the timeout
						return stream.Hold(errors.New("sink down"))
					}
					mu.Lock()
					defer mu.Unlock()
					for _, m := range batch {
						handled[string(m.Payload)]++
					}
					return nil
				}}
			runner, err := stream.NewRunner(rdb, stage, stream.Telemetry{Logger: slog.New(logs)})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- runner.Run(ctx) }()
			t.Cleanup(func() { cancel(); <-done })

			testenv.WaitFor(t, 10*time.Second, func() bool { return calls.Load() >= 3 }, "the held batch called three times")
			pending := func() int64 {
				p, err := rdb.XPending(t.Context(), topic.Stream(0), "held").Result()
				if err != nil {
					t.Fatal(err)
				}
				return p.Count
			}
			if tt.recovers {
				down.Store(false)
				testenv.WaitFor(t, 10*time.Second, func() bool { return pending() == 0 }, "the held batch acknowledged")
				mu.Lock()
				if len(handled) != n {
					t.Errorf("handled %v, want the %d messages", handled, n)
				}
				mu.Unlock()
			} else {
				cancel()
				if err := <-done; err != nil {
					t.Fatalf("Run: %v", err)
				}
				done <- nil
				if p := pending(); p != n {
					t.Errorf("%d messages pending after the stop, want the %d held", p, n)
				}
				if got := logs.Count("held batch released at stop; its messages stay pending", nil); got != 1 {
					t.Errorf("%d lines about the held batch at stop, want 1", got)
				}
			}
			if l := later.Load(); l != 0 {
				t.Errorf("%d messages handed over on a later delivery, want all on their first", l)
			}
			if dead := rdb.XLen(t.Context(), topic.DeadLetterStream(0)).Val(); dead != 0 {
				t.Errorf("%d dead letters, want none", dead)
			}
			if got := logs.Count("message failed", nil); got != 0 {
				t.Errorf("%d per-message failure warnings, want none", got)
			}
		})
	}
}
