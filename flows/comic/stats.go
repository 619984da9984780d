package comic

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// PatternStat is a SearchPattern's subscription count and its value sets
// past StoreConfig.BloatThreshold, with their extra shards.
type PatternStat struct {
	Pattern          string `json:"pattern"`
	Subscriptions    int64  `json:"subscriptions"`
	BloatedValueSets int    `json:"bloated_value_sets"`
	ExtraShards      int    `json:"extra_shards"`
}

// FieldStat is a field's diversity: the frequency of its most frequent
// value over the subscriptions that constrain it (1: all ask the same).
type FieldStat struct {
	Field         string  `json:"field"`
	Subscriptions int64   `json:"subscriptions"`
	Distinct      int64   `json:"distinct_values"`
	TopValue      string  `json:"top_value"`
	TopCount      int64   `json:"top_count"`
	Diversity     float64 `json:"diversity"`
}

// Stats is GET /v1/comics/patterns/stats.
type Stats struct {
	Subscriptions  int64         `json:"subscriptions"`
	Patterns       []PatternStat `json:"patterns"`
	Fields         []FieldStat   `json:"fields"`
	BloatThreshold int           `json:"bloat_threshold"`
}

// Stats returns subscriptions per pattern, with their bloated value sets,
// and every field's diversity, in reads bounded by the patterns and fields.
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	pipe := s.rdb.Pipeline()
	patterns := pipe.ZRangeWithScores(ctx, patternsKey, 0, -1)
	bloated := pipe.HGetAll(ctx, bloatKey)
	totals := pipe.HGetAll(ctx, fieldTotalKey)
	total := pipe.HLen(ctx, subsKey)
	tops := make([]*redis.ZSliceCmd, len(fields))
	cards := make([]*redis.IntCmd, len(fields))
	for i, f := range fields {
		tops[i] = pipe.ZRevRangeWithScores(ctx, fieldStatsKey(f.name), 0, 0)
		cards[i] = pipe.ZCard(ctx, fieldStatsKey(f.name))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return Stats{}, fmt.Errorf("comic: stats: %w", err)
	}
	out := Stats{Subscriptions: total.Val(), BloatThreshold: s.cfg.BloatThreshold, Patterns: []PatternStat{}}
	byPattern := map[string]int{}
	for _, z := range patterns.Val() {
		name, _ := z.Member.(string)
		byPattern[name] = len(out.Patterns)
		out.Patterns = append(out.Patterns, PatternStat{Pattern: name, Subscriptions: int64(z.Score)})
	}
	for field, k := range bloated.Val() {
		i, ok := byPattern[field[:max(0, strings.LastIndexByte(field, ':'))]]
		n, _ := strconv.Atoi(k)
		if ok && n > 0 {
			out.Patterns[i].BloatedValueSets++
			out.Patterns[i].ExtraShards += n
		}
	}
	slices.SortFunc(out.Patterns, func(a, b PatternStat) int {
		return cmp.Or(cmp.Compare(b.Subscriptions, a.Subscriptions), strings.Compare(a.Pattern, b.Pattern))
	})
	for i, f := range fields {
		fs := FieldStat{Field: f.name, Distinct: cards[i].Val()}
		fs.Subscriptions, _ = strconv.ParseInt(totals.Val()[f.name], 10, 64)
		if top := tops[i].Val(); len(top) == 1 {
			fs.TopValue, _ = top[0].Member.(string)
			fs.TopCount = int64(top[0].Score)
		}
		if fs.Subscriptions > 0 {
			fs.Diversity = float64(fs.TopCount) / float64(fs.Subscriptions)
		}
		out.Fields = append(out.Fields, fs)
	}
	return out, nil
}
