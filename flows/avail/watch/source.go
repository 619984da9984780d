package watch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/internal/rediskey"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/stream"
)

// SourceInfo is what the stage needs to know of a source to tell its
// watchers about its health.
type SourceInfo struct {
	Provider string
	Scopes   []avail.Scope
	// Interval is the source's poll interval: an opening first seen within
	// two intervals of its recovery carries the blind period.
	Interval time.Duration
}

// DefaultBlindGrace is how long after a recovery an opening carries the
// blind period when the source's interval is unknown.
const DefaultBlindGrace = 10 * time.Minute

// ErrSourceUnknown is returned (wrapped) by a SourceLookup for a source
// that no longer exists: its health notices reach nobody.
var ErrSourceUnknown = errors.New("notifier: source unknown")

// SourceLookup returns a source's provider, scopes and poll interval;
// an error wrapping ErrSourceUnknown when it is gone.
type SourceLookup func(ctx context.Context, sourceID string) (SourceInfo, error)

// blindKey is the hash of a source's last blind period: since_ms, and once
// back, up_ms, blind_s and grace_ms.
func blindKey(sourceID string) string {
	return rediskey.Key(rediskey.Tag("src."+sourceID), "notifier", "blind")
}

// blindSince is when a source last answered before the transition.
func blindSince(t avail.Transition) time.Time {
	if s := t.Entity.Attrs["blind_since"]; s != "" {
		if at, err := time.Parse(time.RFC3339Nano, s); err == nil {
			return at
		}
	}
	if !t.LastSeen.IsZero() && t.Kind == avail.KindClose {
		return t.LastSeen
	}
	return time.Time{}
}

// minutes renders a duration in seconds as whole minutes ("12 min"), at
// least 1.
func minutes(seconds int64) string {
	return strconv.FormatInt(max((seconds+30)/60, 1), 10) + " min"
}

// sourceHealth records a source going down or up and tells the watchers it
// serves once, under "<watcher id>:source:<source id>:<run id>".
func (h *handler) sourceHealth(ctx context.Context, m *stream.Message, t avail.Transition) error {
	sourceID := cmp.Or(t.SourceID, t.Entity.Venue)
	if sourceID == "" {
		return nil
	}
	var info SourceInfo
	if h.cfg.Sources != nil {
		var err error
		if info, err = h.cfg.Sources(ctx, sourceID); err != nil && !errors.Is(err, ErrSourceUnknown) {
			return fmt.Errorf("notifier: source %s: %w", sourceID, err)
		}
	}
	st := SourceStatus{SourceID: sourceID, Status: "down"}
	st.ConsecutiveFailures, _ = strconv.Atoi(t.Entity.Attrs["consecutive_failures"])
	key := blindKey(sourceID)
	var fields []any // of the blind hash; a close drops the others
	if t.Kind == avail.KindClose {
		st.BlindSince = blindSince(t)
		if st.BlindSince.IsZero() {
			st.BlindSince = t.RunAt
		}
		fields = []any{"since_ms", st.BlindSince.UnixMilli()}
	} else {
		st.Status = "up"
		if st.BlindSince = blindSince(t); st.BlindSince.IsZero() {
			ms, _ := h.windows.rdb.HGet(ctx, key, "since_ms").Int64()
			if ms > 0 {
				st.BlindSince = time.UnixMilli(ms).UTC()
			}
		}
		if !st.BlindSince.IsZero() {
			st.BlindForSeconds = max(int64(t.RunAt.Sub(st.BlindSince).Seconds()), 0)
		}
		grace := DefaultBlindGrace
		if info.Interval > 0 {
			grace = max(2*info.Interval, time.Minute)
		}
		fields = []any{"since_ms", st.BlindSince.UnixMilli(), "up_ms", t.RunAt.UnixMilli(),
			"blind_s", st.BlindForSeconds, "grace_ms", grace.Milliseconds()}
	}
	_, err := h.windows.rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.HSet(ctx, key, fields...)
		if t.Kind == avail.KindClose {
			pipe.HDel(ctx, key, "up_ms", "blind_s", "grace_ms")
		}
		pipe.PExpire(ctx, key, h.cfg.WindowTTL)
		return nil
	})
	if err != nil {
		return fmt.Errorf("notifier: record blind period of %s: %w", sourceID, err)
	}
	if info.Provider == "" {
		return nil // unknown source, or no lookup: nobody to tell
	}
	watchers, err := h.store.ServedBy(ctx, info.Provider, info.Scopes)
	if err != nil {
		return err
	}
	event, text := EventSourceDown, "source "+sourceID+" is down: openings it serves are not seen until it is back"
	if st.Status == "up" {
		event, text = EventSourceUp, "source "+sourceID+" is back"
		if st.BlindForSeconds > 0 {
			text += " after being blind for " + minutes(st.BlindForSeconds)
		}
	}
	eventID := avail.EventID(t.RunID, t.Entity.Key, t.Kind, true)
	var outs []outgoing
	for _, w := range active(watchers) {
		if w.MuteSourceHealth {
			continue
		}
		s := st
		outs = append(outs, outgoing{w: w, key: w.ID + ":source:" + sourceID + ":" + t.RunID, ev: OpenEvent{Event: event, WatcherID: w.ID,
			Entity: avail.Entity{Key: t.Entity.Key, Kind: avail.EntitySource, Provider: info.Provider, Venue: sourceID},
			RunAt:  t.RunAt, EventID: eventID, TraceID: traceOf(ctx, t), Source: &s, BlindForSeconds: st.BlindForSeconds, Text: text}})
	}
	_, errs := h.send(ctx, m, t.RunID, outs)
	return notifier.Settle(errs)
}

// blindBefore returns the source's last blind period in seconds when an
// opening first seen at openedAt falls in it or its grace; else 0.
func (h *handler) blindBefore(ctx context.Context, sourceID string, openedAt time.Time) (int64, error) {
	if sourceID == "" {
		return 0, nil
	}
	vals, err := h.windows.rdb.HMGet(ctx, blindKey(sourceID), "since_ms", "up_ms", "blind_s", "grace_ms").Result()
	if err != nil {
		return 0, fmt.Errorf("notifier: blind period of %s: %w", sourceID, err)
	}
	n := make([]int64, len(vals))
	for i, v := range vals {
		s, _ := v.(string)
		n[i], _ = strconv.ParseInt(s, 10, 64)
	}
	since, up, blind, grace := n[0], n[1], n[2], n[3]
	at := openedAt.UnixMilli()
	if up == 0 || blind <= 0 || at <= since || at > up+grace {
		return 0, nil
	}
	return blind, nil
}
