package watch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/stream"
)

// windows keeps each entity's recent raw flips (sorted by run_at, then run
// id), so a stable open can be given its window's session id.
type windows struct {
	rdb   redis.UniversalClient
	topic stream.Topic
	ttl   time.Duration
	max   int
}

const memberSep = "\x00"

// record adds a raw flip of an entity, keeps the newest w.max flips and
// renews the set's expiry.
func (w *windows) record(ctx context.Context, partition int, entityKey, kind, runID string, runAt time.Time) error {
	key := eventsKey(w.topic, partition, entityKey)
	_, err := w.rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.ZAdd(ctx, key, redis.Z{Score: float64(runAt.UnixMilli()), Member: runID + memberSep + kind})
		pipe.ZRemRangeByRank(ctx, key, 0, int64(-w.max-1))
		pipe.PExpire(ctx, key, w.ttl)
		return nil
	})
	if err != nil {
		return fmt.Errorf("notifier: record %s of %s: %w", kind, clip.Marked(entityKey, maxQuoted), err)
	}
	return nil
}

// window is what the remembered flips tell of the open window a stable
// open confirms.
type window struct {
	// Session is avail.SessionID(entity key, run id of the raw open that
	// began the window); OK false when that open is not remembered.
	Session string
	OK      bool
	// OpenedAt is the raw open's run_at (zero when not OK).
	OpenedAt time.Time
	// ClosedFor is how long the entity was closed before that raw open;
	// Reopened is false when no earlier close is remembered.
	ClosedFor time.Duration
	Reopened  bool
}

// window returns the open window a stable open of run (runAt, runID)
// confirms, and the raw close before it.
func (w *windows) window(ctx context.Context, partition int, entityKey, runID string, runAt time.Time) (window, error) {
	ms := runAt.UnixMilli()
	zs, err := w.rdb.ZRevRangeByScoreWithScores(ctx, eventsKey(w.topic, partition, entityKey), &redis.ZRangeBy{
		Max: fmt.Sprint(ms), Min: "-inf", Count: int64(w.max)}).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return window{}, fmt.Errorf("notifier: session of %s: %w", clip.Marked(entityKey, maxQuoted), err)
	}
	var out window
	for _, z := range zs {
		member, _ := z.Member.(string)
		run, kind, found := strings.Cut(member, memberSep)
		if !found || int64(z.Score) == ms && run > runID {
			continue // a later run of the same millisecond
		}
		at := time.UnixMilli(int64(z.Score)).UTC()
		if !out.OK {
			if kind != avail.KindOpen {
				return window{}, nil
			}
			out.Session, out.OK, out.OpenedAt = avail.SessionID(entityKey, run), true, at
			continue
		}
		if kind == avail.KindClose {
			out.ClosedFor, out.Reopened = out.OpenedAt.Sub(at), true
		}
		break
	}
	return out, nil
}
