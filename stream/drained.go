package stream

import (
	"context"
	"fmt"
	"slices"
	"strings"

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

// Unhandled is how many entries of topic the groups have not acknowledged
// (lag + pending); a missing group counts the whole stream.
func Unhandled(ctx context.Context, rdb redis.UniversalClient, topic Topic, groups ...string) (int64, error) {
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
