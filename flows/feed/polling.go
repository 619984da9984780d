package feed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"

	"github.com/dropstream/dropstream/flows/feed/poll"
	"github.com/dropstream/dropstream/internal/recordstore"
)

// Feed states, as FeedPolling.State shows them.
const (
	// FeedActive: polled (or pushed) as scheduled.
	FeedActive = "active"
	// FeedGone: the server answered 410 Gone; no longer polled.
	FeedGone = "gone"
	// FeedDead: EtiquetteConfig.DeadAfter polls in a row failed; no
	// longer polled.
	FeedDead = "dead"
)

// ErrHalted: the feed is gone or dead and is not polled.
var ErrHalted = errors.New("feed: feed is no longer polled")

// Halt records why a feed stopped being polled.
type Halt struct {
	State  string    `json:"state"`
	Reason string    `json:"reason"`
	Since  time.Time `json:"since"`
	// Told is set once its subscribers were told.
	Told bool `json:"told,omitempty"`
}

// FeedStats are one feed's polling figures, kept by the poller copies
// and the WebSub callback in Redis.
type FeedStats struct {
	// Requests counts fetches (failures included); NotModified those
	// answered 304, NotModifiedShare their share.
	Requests         int64   `json:"requests"`
	NotModified      int64   `json:"not_modified"`
	NotModifiedShare float64 `json:"not_modified_share"`
	// Bytes is the body bytes received (decompressed).
	Bytes int64 `json:"bytes"`
	// NextPoll is the next poll; Interval the delay chosen last and
	// IntervalReason why (interval, adaptive, fresh, ttl, skip, push, ...).
	NextPoll       *time.Time `json:"next_poll,omitempty"`
	Interval       string     `json:"interval,omitempty"`
	IntervalReason string     `json:"interval_reason,omitempty"`
	// HeldDuplicates counts new items held back as duplicates of items
	// already seen (same canonical link and content under another guid).
	HeldDuplicates int64 `json:"held_duplicates"`
	// Pushes counts the contents a WebSub hub pushed and the flow took.
	Pushes int64 `json:"pushes"`
}

// FeedPolling is how a feed is polled: its state, its figures and its
// WebSub subscription, as the API shows it.
type FeedPolling struct {
	State  string `json:"state"`
	Halted *Halt  `json:"halted,omitempty"`
	FeedStats
	WebSub *WebSubView `json:"websub,omitempty"`
}

func statsKey(id string) string { return defsKey("stats:" + id) }

// Polling returns how a feed is polled.
func (f *Flow) Polling(ctx context.Context, id string) (FeedPolling, error) {
	if !validID(id) {
		return FeedPolling{}, ErrNotFound
	}
	pipe := f.rdb.Pipeline()
	stats := pipe.HGetAll(ctx, statsKey(id))
	halted := pipe.HGet(ctx, defsKey("halted"), id)
	held := pipe.HGet(ctx, f.topics.feedPrefix(id)+"meta", "held")
	ws := pipe.HGet(ctx, defsKey("websub"), id)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return FeedPolling{}, fmt.Errorf("feed: polling of %s: %w", id, err)
	}
	out := FeedPolling{State: FeedActive}
	h := stats.Val()
	num := func(k string) int64 { n, _ := strconv.ParseInt(h[k], 10, 64); return n }
	out.Requests, out.NotModified, out.Bytes, out.Pushes = num("requests"), num("not_modified"), num("bytes"), num("pushes")
	if out.Requests > 0 {
		out.NotModifiedShare = float64(out.NotModified) / float64(out.Requests)
	}
	if ms := num("next_ms"); ms > 0 {
		t := time.UnixMilli(ms).UTC()
		out.NextPoll = &t
	}
	if ms := num("interval_ms"); ms > 0 {
		out.Interval = (time.Duration(ms) * time.Millisecond).String()
	}
	out.IntervalReason = h["reason"]
	out.HeldDuplicates, _ = strconv.ParseInt(held.Val(), 10, 64)
	var hl Halt
	if raw := halted.Val(); raw != "" && json.Unmarshal([]byte(raw), &hl) == nil {
		out.State, out.Halted, out.NextPoll = hl.State, &hl, nil
	}
	var sub webSub
	if raw := ws.Val(); raw != "" && json.Unmarshal([]byte(raw), &sub) == nil {
		v := sub.view()
		out.WebSub = &v
	}
	return out, nil
}

// halted returns the feeds that are no longer polled.
func (s *Store) halted(ctx context.Context) (map[string]bool, error) {
	ids, err := s.rdb.HKeys(ctx, defsKey("halted")).Result()
	if err != nil {
		return nil, fmt.Errorf("feed: halted feeds: %w", err)
	}
	out := make(map[string]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out, nil
}

// isHalted reports whether a feed is no longer polled.
func (s *Store) isHalted(ctx context.Context, id string) (bool, error) {
	ok, err := s.rdb.HExists(ctx, defsKey("halted"), id).Result()
	if err != nil {
		return false, fmt.Errorf("feed: halted %s: %w", id, err)
	}
	return ok, nil
}

// recordFetch adds one fetch to a feed's figures.
func (p *Poller) recordFetch(ctx context.Context, id string, resp poll.Response, err error) {
	f := p.flow
	outcome := "ok"
	switch {
	case errors.Is(err, poll.ErrGone):
		outcome = "gone"
	case err != nil:
		outcome = "error"
	case resp.NotModified:
		outcome = "not_modified"
	}
	f.requests.Add(ctx, 1, metric.WithAttributeSet(outcomeAttrs(outcome)))
	if resp.Bytes > 0 {
		f.bytes.Add(ctx, resp.Bytes)
	}
	pipe := f.rdb.Pipeline()
	pipe.HIncrBy(ctx, statsKey(id), "requests", 1)
	if resp.NotModified {
		pipe.HIncrBy(ctx, statsKey(id), "not_modified", 1)
	}
	if resp.Bytes > 0 {
		pipe.HIncrBy(ctx, statsKey(id), "bytes", resp.Bytes)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		f.log.WarnContext(ctx, "feed poller: figures not kept", "feed_id", id, "error", err)
	}
}

// recordSchedule keeps a feed's next poll, and the delay and reason
// chosen.
func (p *Poller) recordSchedule(ctx context.Context, id string, now time.Time, d time.Duration, reason string) {
	f := p.flow
	f.schedules.Add(ctx, 1, metric.WithAttributeSet(reasonAttrs(reason)))
	if err := f.rdb.HSet(ctx, statsKey(id), "next_ms", now.Add(d).UnixMilli(), "interval_ms", d.Milliseconds(), "reason", reason).Err(); err != nil {
		f.log.WarnContext(ctx, "feed poller: schedule not kept", "feed_id", id, "error", err)
	}
}

// docHints returns the document hints kept from a feed's latest document
// (a 304 answer has none of its own), and keeps new ones.
func (p *Poller) docHints(ctx context.Context, id string, fresh *poll.Hints) poll.Hints {
	if fresh != nil {
		b, _ := json.Marshal(fresh)
		_ = p.flow.rdb.HSet(ctx, statsKey(id), "hints", b).Err()
		return *fresh
	}
	h, _ := recordstore.InHash[poll.Hints](p.flow.rdb, statsKey(id)).Get(ctx, "hints")
	return h
}

// arrivals returns when a feed's latest polls found new items, newest
// first (the observe script keeps them).
func (p *Poller) arrivals(ctx context.Context, id string) []time.Time {
	raw, err := p.flow.rdb.LRange(ctx, p.flow.topics.feedPrefix(id)+"arrivals", 0, int64(p.flow.cfg.Etiquette.History-1)).Result()
	if err != nil {
		return nil
	}
	out := make([]time.Time, 0, len(raw))
	for _, s := range raw {
		if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
			out = append(out, time.UnixMilli(ms))
		}
	}
	return out
}
