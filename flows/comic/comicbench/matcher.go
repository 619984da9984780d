package comicbench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/flows/comic"
	"github.com/dropstream/dropstream/stream"
)

// discardGroup consumes the notify topic in the bench: it acknowledges the
// requests without delivering them (delivery is not measured), so the
// trimmer can remove them.
const discardGroup = "comicbench-discard"

// measureMatcher runs the matcher stage over the intake backlog, with the
// discarding group on the notify topic and a trimmer removing what both
// groups acknowledged, until both backlogs are empty.
func measureMatcher(ctx context.Context, rdb redis.UniversalClient, svc *comic.Service, cfg Config, res *Result, progress func(string, ...any)) error {
	if err := stream.EnsureGroups(ctx, rdb, svc.Topics.Notify, discardGroup); err != nil {
		return err
	}
	mctx, cancel := context.WithCancel(ctx)
	var handed atomic.Int64
	matcher := svc.Matcher.Stage()
	matcher.Config = stream.RunnerConfig{BatchSize: 500, Block: 50 * time.Millisecond}
	discard := svc.Delivery.DiscardStage(discardGroup)
	discard.Config = stream.RunnerConfig{BatchSize: 1000, Block: 50 * time.Millisecond}
	inner := discard.BatchHandler
	discard.BatchHandler = func(ctx context.Context, msgs []*stream.Message) error {
		err := inner(ctx, msgs)
		if err == nil {
			handed.Add(int64(len(msgs)))
		}
		return err
	}
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for _, st := range []stream.Stage{matcher, discard} {
		r, err := stream.NewRunner(rdb, st, stream.Telemetry{})
		if err != nil {
			return err
		}
		wg.Go(func() { _ = r.Run(mctx) })
	}
	trimmer := stream.NewTrimmer(rdb, stream.TrimConfig{MinAge: time.Millisecond, Interval: 200 * time.Millisecond}, nil,
		svc.Topics.Jobs, svc.Topics.Notify)
	wg.Go(func() { trimmer.Run(mctx) })
	began, last := time.Now(), time.Now()
	var matched time.Duration
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		jobs, err := backlog(ctx, rdb, svc.Topics.Jobs, matcher.Name)
		if err != nil {
			return err
		}
		if jobs == 0 && matched == 0 {
			matched = time.Since(began)
		}
		notify, err := backlog(ctx, rdb, svc.Topics.Notify, discardGroup)
		if err != nil {
			return err
		}
		n, err := streamLen(ctx, rdb, svc.Topics.Notify)
		if err != nil {
			return err
		}
		res.NotifyPeak = max(res.NotifyPeak, n)
		if jobs == 0 && notify == 0 {
			break
		}
		if time.Since(last) >= 5*time.Second {
			last = time.Now()
			progress("matcher: %d jobs and %d notifications to go, notify streams %d entries, redis used_memory %d MB",
				jobs, notify, n, usedMemory(ctx, rdb)>>20)
		}
		time.Sleep(20 * time.Millisecond)
	}
	res.MatcherPerSecond = float64(cfg.Intake) / matched.Seconds()
	res.Handed = handed.Load()
	progress("matcher stage: %d comics at %.0f/s, %d notifications handed off (notify streams peaked at %d entries)",
		cfg.Intake, res.MatcherPerSecond, res.Handed, res.NotifyPeak)
	return nil
}

// backlog is what group has not yet acknowledged on topic: its pending
// entries, plus one when entries after its last delivered one remain.
func backlog(ctx context.Context, rdb redis.UniversalClient, topic stream.Topic, group string) (int64, error) {
	var n int64
	for p := 0; p < topic.Partitions; p++ {
		groups, err := rdb.XInfoGroups(ctx, topic.Stream(p)).Result()
		if err != nil {
			return 0, err
		}
		for _, g := range groups {
			if g.Name != group {
				continue
			}
			n += g.Pending
			after, err := rdb.XRangeN(ctx, topic.Stream(p), afterID(g.LastDeliveredID), "+", 1).Result()
			if err != nil {
				return 0, err
			}
			n += int64(len(after))
		}
	}
	return n, nil
}

// afterID returns the smallest stream id after id.
func afterID(id string) string {
	ms, seq, ok := strings.Cut(id, "-")
	s, err := strconv.ParseUint(seq, 10, 64)
	if !ok || err != nil {
		return "0-1"
	}
	return ms + "-" + strconv.FormatUint(s+1, 10)
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
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			used := usedMemory(wctx, m.rdb)
			if used > m.peak.Load() {
				m.peak.Store(used)
			}
			if used > m.limit {
				cancel(fmt.Errorf("%w: used_memory %d MB over %d MB", ErrMemory, used>>20, m.limit>>20))
				return
			}
			select {
			case <-wctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() { stopWatch(); <-done }
}

// usedMemory returns Redis used_memory, or 0 when INFO fails (miniredis).
func usedMemory(ctx context.Context, rdb redis.UniversalClient) int64 {
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}
