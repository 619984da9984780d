package comicbench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/flows/comic"
	"github.com/dropstream/dropstream/internal/benchstat"
	"github.com/dropstream/dropstream/internal/tick"
	"github.com/dropstream/dropstream/stream"
)

// discardGroup consumes the notify topic in the bench: it acknowledges the
// requests without delivering them (delivery is not measured), so the
// trimmer can remove them.
const discardGroup = "comicbench-discard"

// drain is the discarding group on the notify topic and a trimmer removing
// what both groups acknowledged, running for the whole measurement. It
// can be paused, so a phase measures the matching's CPU alone.
type drain struct {
	rdb    redis.UniversalClient
	topic  stream.Topic
	gate   sync.RWMutex
	handed atomic.Int64
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startDrain starts the discarding group and the trimmer of the jobs and
// notify topics.
func startDrain(ctx context.Context, rdb redis.UniversalClient, svc *comic.Flow) (*drain, error) {
	if err := stream.EnsureGroups(ctx, rdb, svc.Topics().Notify, discardGroup); err != nil {
		return nil, err
	}
	d := &drain{rdb: rdb, topic: svc.Topics().Notify}
	discard := svc.Delivery.DiscardStage(discardGroup)
	discard.Config = stream.RunnerConfig{BatchSize: 1000, Block: 50 * time.Millisecond, HandlerTimeout: 20 * time.Second, ClaimIdle: 2 * time.Minute}
	inner := discard.BatchHandler
	discard.BatchHandler = func(ctx context.Context, msgs []*stream.Message) error {
		d.gate.RLock()
		defer d.gate.RUnlock()
		err := inner(ctx, msgs)
		if err == nil {
			d.handed.Add(int64(len(msgs)))
		}
		return err
	}
	r, err := stream.NewRunner(rdb, discard, stream.Telemetry{})
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithCancel(ctx)
	d.cancel = cancel
	trimmer := stream.NewTrimmer(rdb, stream.TrimConfig{MinAge: time.Millisecond, Interval: 200 * time.Millisecond}, nil,
		svc.Topics().Jobs, svc.Topics().Notify)
	d.wg.Go(func() { _ = r.Run(dctx) })
	d.wg.Go(func() { trimmer.Run(dctx) })
	return d, nil
}

// pause holds the discarding group's next batch until resume.
func (d *drain) pause()  { d.gate.Lock() }
func (d *drain) resume() { d.gate.Unlock() }

// waitDrained waits until the discarding group has acknowledged every
// notification request.
func (d *drain) waitDrained(ctx context.Context) error {
	return benchstat.Until(ctx, 20*time.Millisecond, func() (bool, error) {
		n, err := stream.Unhandled(ctx, d.rdb, d.topic, discardGroup)
		return n == 0, err
	})
}

func (d *drain) stop() {
	d.cancel()
	d.wg.Wait()
}

func streamLen(ctx context.Context, rdb redis.UniversalClient, topic stream.Topic) (int64, error) {
	var n int64
	for p := 0; p < topic.Partitions; p++ {
		l, err := rdb.XLen(ctx, topic.Stream(p)).Result()
		if err != nil {
			return 0, fmt.Errorf("comicbench: xlen: %w", err)
		}
		n += l
	}
	return n, nil
}

// memWatch samples Redis used_memory and cancels the run past the limit.
type memWatch struct {
	rdb   redis.UniversalClient
	limit int64
	peak  atomic.Int64
}

func (m *memWatch) start(ctx context.Context, cancel context.CancelCauseFunc) (stop func()) {
	wctx, stopWatch := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick.Every(wctx, 250*time.Millisecond, func() {
			used := benchstat.UsedMemory(wctx, m.rdb)
			m.peak.Store(max(m.peak.Load(), used))
			if used > m.limit {
				cancel(fmt.Errorf("%w: used_memory %d MB over %d MB", ErrMemory, used>>20, m.limit>>20))
			}
		})
	}()
	return func() { stopWatch(); <-done }
}
