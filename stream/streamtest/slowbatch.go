package streamtest

import (
	"context"
	"testing"
	"time"

	"github.com/dropstream/dropstream/stream"
)

// testSlowBatchNotHandledTwice: a batch that takes several ClaimIdle to
// work through, beside a second live copy, has none of its messages
// handled twice: the copy holding it acknowledges what it handled and keeps
// the rest from going stale while it works.
func testSlowBatchNotHandledTwice(t *testing.T, b Backend) {
	rdb := b.Client(t)
	topic := newTopic(1)
	const n = 256
	publishN(t, rdb, topic, 0, n, 16)
	cfg := fastConfig()
	cfg.BatchSize = n
	cfg.HandlerTimeout = 100 * time.Millisecond
	cfg.ClaimIdle = 500 * time.Millisecond
	cfg.ClaimInterval = 50 * time.Millisecond
	rec := newRecorder()
	first := make(chan struct{}, 1)
	stage := stream.Stage{Name: "slow", Topic: topic, Config: cfg,
		Handler: func(_ context.Context, m *stream.Message) error {
			select {
			case first <- struct{}{}:
			default:
			}
			time.Sleep(10 * time.Millisecond) // the work: 2.5s for the batch
			rec.ok(m)
			return nil
		}}
	start(t, rdb, stage, stream.Telemetry{})
	<-first // the first copy holds the whole batch
	start(t, rdb, stage, stream.Telemetry{})
	rec.waitAll(t, n)
	waitPending(t, rdb, topic, "slow", 0)
	seen, _, _ := rec.snapshot()
	twice := 0
	for _, c := range seen {
		if c > 1 {
			twice++
		}
	}
	if twice > 0 {
		t.Errorf("%d of %d messages handled more than once by two live copies", twice, n)
	}
	AssertConserved(t, rdb, topic, "slow")
}
