package streamtest

import (
	"context"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/stream"
)

// RunStages runs one copy of each stage with tel until the test ends. A
// runner that fails to start or returns an error fails the test.
func RunStages(t testing.TB, rdb redis.UniversalClient, tel stream.Telemetry, stages ...stream.Stage) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for _, s := range stages {
		r, err := stream.NewRunner(rdb, s, tel)
		if err != nil {
			t.Fatalf("NewRunner %s: %v", s.Name, err)
		}
		wg.Go(func() {
			if err := r.Run(ctx); err != nil {
				t.Errorf("Run %s: %v", s.Name, err)
			}
		})
	}
}

// GroupState is a stage group's counters summed over its topic's
// partitions.
type GroupState struct {
	Read, Pending, Lag, Dead int64
	// MaxDeliveries is the highest delivery count of a pending entry.
	MaxDeliveries int64
}

// GroupStateOf reads group's counters on topic. A partition whose stream
// or group does not exist yet counts nothing.
func GroupStateOf(t testing.TB, rdb redis.UniversalClient, topic stream.Topic, group string) GroupState {
	t.Helper()
	ctx := t.Context()
	var s GroupState
	for p := range topic.Partitions {
		s.Dead += rdb.XLen(ctx, topic.DeadLetterStream(p)).Val()
		groups, err := rdb.XInfoGroups(ctx, topic.Stream(p)).Result()
		if err != nil {
			continue // stream or group not created yet
		}
		for _, g := range groups {
			if g.Name == group {
				s.Read += g.EntriesRead
				s.Pending += g.Pending
				s.Lag += g.Lag
			}
		}
		pend, _ := rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: topic.Stream(p), Group: group,
			Start: "-", End: "+", Count: 1000}).Result()
		for _, e := range pend {
			s.MaxDeliveries = max(s.MaxDeliveries, e.RetryCount)
		}
	}
	return s
}
