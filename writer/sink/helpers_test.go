package sink_test

import (
	"context"
	"log/slog"
	"net/url"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/stream"
)

// quiet discards the logs of stages and histories under test.
var quiet = slog.New(slog.DiscardHandler)

// runStages runs one copy of each stage until the test ends.
func runStages(t *testing.T, rdb redis.UniversalClient, stages ...stream.Stage) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, len(stages))
	for _, s := range stages {
		r, err := stream.NewRunner(rdb, s, stream.Telemetry{Logger: quiet})
		if err != nil {
			t.Fatalf("NewRunner %s: %v", s.Name, err)
		}
		go func() {
			defer func() { done <- struct{}{} }()
			if err := r.Run(ctx); err != nil {
				t.Errorf("Run %s: %v", s.Name, err)
			}
		}()
	}
	t.Cleanup(func() {
		cancel()
		for range stages {
			<-done
		}
	})
}

// groupState sums a stage group's counters over its topic's partitions.
type groupState struct {
	read, pending, lag, dead int64
	maxDeliveries            int64
}

func stateOf(t *testing.T, rdb redis.UniversalClient, topic stream.Topic, group string) groupState {
	t.Helper()
	ctx := t.Context()
	var s groupState
	for p := range topic.Partitions {
		s.dead += rdb.XLen(ctx, topic.DeadLetterStream(p)).Val()
		groups, err := rdb.XInfoGroups(ctx, topic.Stream(p)).Result()
		if err != nil {
			continue // stream or group not created yet
		}
		for _, g := range groups {
			if g.Name == group {
				s.read += g.EntriesRead
				s.pending += g.Pending
				s.lag += g.Lag
			}
		}
		pend, _ := rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: topic.Stream(p), Group: group,
			Start: "-", End: "+", Count: 1000}).Result()
		for _, e := range pend {
			s.maxDeliveries = max(s.maxDeliveries, e.RetryCount)
		}
	}
	return s
}

// openClickHouse connects to dsn (optionally through a proxy at addr) and
// returns the client.
func openClickHouse(t *testing.T, dsn, addr string) *clickhouse.Client {
	t.Helper()
	if addr != "" {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatalf("dsn: %v", err)
		}
		u.Host = addr
		dsn = u.String()
	}
	c, err := clickhouse.Open(t.Context(), clickhouse.Config{DSN: dsn, DialTimeout: time.Second})
	if err != nil {
		t.Fatalf("clickhouse Open: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
