package stream

import (
	"context"
	"slices"

	"github.com/redis/go-redis/v9"
)

// Drained reports whether group has read and acknowledged every entry of
// every partition of topic. An empty partition counts as drained; an
// error, or a partition with entries and no such group, as not.
func Drained(ctx context.Context, rdb redis.UniversalClient, topic Topic, group string) bool {
	for p := range topic.Partitions {
		key := topic.Stream(p)
		last, err := rdb.XRevRangeN(ctx, key, "+", "-", 1).Result()
		if err != nil {
			return false
		}
		if len(last) == 0 {
			continue
		}
		groups, err := rdb.XInfoGroups(ctx, key).Result()
		if err != nil {
			return false
		}
		if !slices.ContainsFunc(groups, func(g redis.XInfoGroup) bool {
			return g.Name == group && g.Pending == 0 && g.LastDeliveredID == last[0].ID
		}) {
			return false
		}
	}
	return true
}
