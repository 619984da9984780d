package benchstat

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/stream"
)

// UsedMemory is Redis's used_memory (INFO memory), summed over the masters
// of a cluster; 0 when it cannot tell (miniredis).
func UsedMemory(ctx context.Context, rdb redis.UniversalClient) int64 {
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		var total atomic.Int64
		_ = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			total.Add(UsedMemory(ctx, c))
			return nil
		})
		return total.Load()
	}
	info, _ := rdb.Info(ctx, "memory").Result()
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// CheckEmpty fails unless rdb's database holds no key; who prefixes the
// error.
func CheckEmpty(ctx context.Context, rdb redis.UniversalClient, who string) error {
	n, err := rdb.DBSize(ctx).Result()
	if err != nil {
		return fmt.Errorf("%s: redis: %w", who, err)
	}
	if n != 0 {
		return fmt.Errorf("%s: the Redis database holds %d keys; the bench needs an empty one (pick another database number in the URL)", who, n)
	}
	return nil
}

// FlushDB empties rdb's database (every master's, on a cluster).
func FlushDB(ctx context.Context, rdb redis.UniversalClient) error {
	if c, ok := rdb.(*redis.ClusterClient); ok {
		return c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.FlushDB(ctx).Err() })
	}
	return rdb.FlushDB(ctx).Err()
}

// RunStages runs copies of each stage with tel until stop, which cancels
// them and waits; a stage that fails is logged on tel.Logger if set.
func RunStages(ctx context.Context, rdb redis.UniversalClient, tel stream.Telemetry, copies int, stages ...stream.Stage) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	stop = sync.OnceFunc(func() { cancel(); wg.Wait() })
	for _, s := range stages {
		for range copies {
			r, err := stream.NewRunner(rdb, s, tel)
			if err != nil {
				stop()
				return nil, err
			}
			wg.Go(func() {
				if err := r.Run(ctx); err != nil && tel.Logger != nil {
					tel.Logger.Error("bench: stage failed", "stage", s.Name, "error", err)
				}
			})
		}
	}
	return stop, nil
}

// Unhandled is how many entries of topic the groups have not acknowledged
// (lag + pending); a missing group counts the whole stream.
func Unhandled(ctx context.Context, rdb redis.UniversalClient, topic stream.Topic, groups ...string) (int64, error) {
	var n int64
	for p := range topic.Partitions {
		s := topic.Stream(p)
		infos, err := rdb.XInfoGroups(ctx, s).Result()
		if err != nil {
			if strings.HasPrefix(err.Error(), "ERR no such key") {
				continue // nothing published to this partition yet
			}
			return 0, fmt.Errorf("xinfo groups: %w", err)
		}
		for _, name := range groups {
			i := slices.IndexFunc(infos, func(g redis.XInfoGroup) bool { return g.Name == name })
			if i < 0 {
				l, err := rdb.XLen(ctx, s).Result()
				if err != nil {
					return 0, fmt.Errorf("xlen: %w", err)
				}
				n += l
				continue
			}
			g := infos[i]
			n += g.Pending
			if g.Lag >= 0 {
				n += g.Lag
				continue
			}
			// The lag is unknown (entries were deleted): one more if
			// entries follow the last delivered.
			last, err := rdb.XRevRangeN(ctx, s, "+", "-", 1).Result()
			if err != nil {
				return 0, fmt.Errorf("xrevrange: %w", err)
			}
			if len(last) > 0 && last[0].ID != g.LastDeliveredID {
				n++
			}
		}
	}
	return n, nil
}
