package stream

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/tick"
)

// TrimConfig configures a Trimmer.
type TrimConfig struct {
	// MinAge keeps entries younger than this even when every group has
	// acknowledged them, for inspection and replay. Default 1h.
	MinAge time.Duration
	// Interval is how often the Trimmer runs. Default 1m.
	Interval time.Duration
	// Now is the clock that ages entries. Default time.Now.
	Now func() time.Time
	// Ungrouped also trims, by age alone, streams that no group reads.
	// Set it only where nothing will ever read them: the embedded Redis
	// without ClickHouse. Default false: such streams are left alone.
	Ungrouped bool
}

// Trimmer removes stream entries older than MinAge that every group has
// acknowledged; it never removes a pending or undelivered entry (Redis would
// lose it silently). Streams without a group are left alone.
type Trimmer struct {
	rdb    redis.UniversalClient
	cfg    TrimConfig
	topics []Topic
	log    *slog.Logger
}

// NewTrimmer returns a trimmer of the given topics' streams.
func NewTrimmer(rdb redis.UniversalClient, cfg TrimConfig, logger *slog.Logger, topics ...Topic) *Trimmer {
	cfg.MinAge = cmp.Or(cfg.MinAge, time.Hour)
	cfg.Interval = cmp.Or(cfg.Interval, time.Minute)
	cfg.Now = tick.Or(cfg.Now)
	return &Trimmer{rdb: rdb, cfg: cfg, topics: topics, log: cmp.Or(logger, slog.Default())}
}

// Run trims every Interval until ctx ends.
func (t *Trimmer) Run(ctx context.Context) {
	tick.Every(ctx, t.cfg.Interval, func() {
		for _, topic := range t.topics {
			for p := 0; p < topic.Partitions; p++ {
				if n, err := t.TrimStream(ctx, topic.Stream(p)); err != nil {
					t.log.WarnContext(ctx, "trim failed", "stream", topic.Stream(p), "error", err)
				} else if n > 0 {
					t.log.DebugContext(ctx, "trimmed", "stream", topic.Stream(p), "entries", n)
				}
			}
		}
	})
}

// TrimStream trims one stream now and returns how many entries went.
func (t *Trimmer) TrimStream(ctx context.Context, stream string) (int64, error) {
	boundary, ok, err := SafeTrimID(ctx, t.rdb, stream)
	if err != nil || (!ok && !t.cfg.Ungrouped) {
		return 0, err
	}
	byAge := strconv.FormatInt(t.cfg.Now().Add(-t.cfg.MinAge).UnixMilli(), 10) + "-0"
	if !ok || compareIDs(byAge, boundary) < 0 {
		boundary = byAge
	}
	n, err := trimScript.Run(ctx, t.rdb, []string{stream, countsKeyOf(stream)}, boundary).Int64()
	if err != nil {
		return 0, fmt.Errorf("trim %s: %w", stream, err)
	}
	return n, nil
}

// SafeTrimID returns the lowest ID that must be kept in stream: entries
// below it were delivered to and acknowledged by every group. ok is false
// when the stream has no group or does not exist.
func SafeTrimID(ctx context.Context, rdb redis.UniversalClient, stream string) (id string, ok bool, err error) {
	groups, err := rdb.XInfoGroups(ctx, stream).Result()
	if err != nil || len(groups) == 0 {
		if err != nil && err.Error() == "ERR no such key" {
			err = nil
		}
		return "", false, err
	}
	for _, g := range groups {
		keep := nextID(g.LastDeliveredID)
		if g.Pending > 0 {
			sum, err := rdb.XPending(ctx, stream, g.Name).Result()
			if err != nil {
				return "", false, fmt.Errorf("pending of %s/%s: %w", stream, g.Name, err)
			}
			if sum.Count > 0 && compareIDs(sum.Lower, keep) < 0 {
				keep = sum.Lower
			}
		}
		if !ok || compareIDs(keep, id) < 0 {
			id, ok = keep, true
		}
	}
	return id, ok, nil
}

// nextID returns the smallest ID after id.
func nextID(id string) string {
	ms, seq, ok := parseID(id)
	if !ok {
		return "0-0"
	}
	if seq == math.MaxUint64 {
		return strconv.FormatUint(ms+1, 10) + "-0"
	}
	return strconv.FormatUint(ms, 10) + "-" + strconv.FormatUint(seq+1, 10)
}
