package benchstat

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
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
