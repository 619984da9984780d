package feed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"

	"github.com/dropstream/dropstream/flows/feed/poll"
	"github.com/dropstream/dropstream/internal/recordstore"
	"github.com/dropstream/dropstream/notifier"
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
	out.Requests, out.NotModified, out.Bytes, out.Pushes = num(h["requests"]), num(h["not_modified"]), num(h["bytes"]), num(h["pushes"])
	if out.Requests > 0 {
		out.NotModifiedShare = float64(out.NotModified) / float64(out.Requests)
	}
	if ms := num(h["next_ms"]); ms > 0 {
		t := time.UnixMilli(ms).UTC()
		out.NextPoll = &t
	}
	if ms := num(h["interval_ms"]); ms > 0 {
		out.Interval = (time.Duration(ms) * time.Millisecond).String()
	}
	out.IntervalReason = h["reason"]
	out.HeldDuplicates = num(held.Val())
	var hl Halt
	if raw := halted.Val(); raw != "" && json.Unmarshal([]byte(raw), &hl) == nil {
		out.State, out.Halted, out.NextPoll = hl.State, &hl, nil
	}
	var sub webSub
	if raw := ws.Val(); raw != "" && json.Unmarshal([]byte(raw), &sub) == nil {
		out.WebSub = &WebSubView{Hub: sub.Hub, Topic: sub.Topic, State: sub.State, RequestedAt: sub.RequestedAt}
		if !sub.ExpiresAt.IsZero() {
			out.WebSub.ExpiresAt = &sub.ExpiresAt
		}
	}
	return out, nil
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
	f.requests.Add(ctx, 1, metric.WithAttributeSet(outcomeSets[outcome]))
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
	f.schedules.Add(ctx, 1, metric.WithAttributeSet(reasonSets[reason]))
	if err := f.rdb.HSet(ctx, statsKey(id), "next_ms", now.Add(d).UnixMilli(), "interval_ms", d.Milliseconds(), "reason", reason).Err(); err != nil {
		f.log.WarnContext(ctx, "feed poller: schedule not kept", "feed_id", id, "error", err)
	}
}

// docHints returns the document hints kept from a feed's latest document
// (a 304 answer has none of its own), and keeps new ones.
func (p *Poller) docHints(ctx context.Context, id string, fresh *poll.Hints) poll.Hints {
	if fresh != nil {
		_ = recordstore.InHash[poll.Hints](p.flow.rdb, statsKey(id)).Put(ctx, "hints", *fresh)
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
		if t := ms(s); !t.IsZero() {
			out = append(out, t)
		}
	}
	return out
}

// halt stops polling a feed (FeedGone or FeedDead; the first halt stays)
// and tells its subscribers, once.
func (f *Flow) halt(ctx context.Context, fd Feed, state, reason string, now time.Time) error {
	b, _ := json.Marshal(Halt{State: state, Reason: clip(reason, 256), Since: now.UTC().Truncate(time.Millisecond)})
	set, err := f.rdb.HSetNX(ctx, defsKey("halted"), fd.ID, b).Result()
	if err != nil {
		return fmt.Errorf("feed: halt %s: %w", fd.ID, err)
	}
	if set {
		f.halts.Add(ctx, 1, metric.WithAttributeSet(attrSet("state", state)))
		f.log.WarnContext(ctx, "feed: no longer polled", "feed_id", fd.ID, "state", state, "reason", reason)
	}
	return f.tellHalted(ctx, fd)
}

// tellHalted tells every confirmed subscription of a halted feed that it is
// no longer polled, once per destination and halt, and marks the halt told.
func (f *Flow) tellHalted(ctx context.Context, fd Feed) error {
	h, err := recordstore.InHash[Halt](f.rdb, defsKey("halted")).Get(ctx, fd.ID)
	if err != nil {
		return fmt.Errorf("feed: halted %s: %w", fd.ID, err)
	}
	if h.Told {
		return nil
	}
	subs, err := f.store.Subscribables(ctx, fd.ID)
	if err != nil {
		return err
	}
	msg := renderHalt(fd, h)
	window := fmt.Sprintf("halt:%s:%d", h.State, h.Since.UnixMilli())
	var reqs []notifier.Request
	var errs []error
	told := map[string]bool{}
	for _, sb := range subs {
		all, err := f.store.Subscriptions(ctx, fd.ID, sb.Key())
		if err != nil {
			return err
		}
		live, _, err := f.resolve(ctx, all)
		if err != nil {
			return err
		}
		for _, sub := range live {
			// Once per destination of each tenant (each has its own
			// notifier subscriber).
			if once := sub.Tenant + "|" + sub.Unique; !sub.Confirmed || told[once] {
				continue
			} else {
				told[once] = true
			}
			if sub.Destination.Kind == DestLog {
				m := msg
				m.Subscribable = sb.Name
				errs = append(errs, f.sendLog(ctx, sub, m, fd.ID+":"+window, fd.ID+":"+window, window, 1, h.Since, ""))
				continue
			}
			body, _ := json.Marshal(Message{Kind: msg.Kind, FeedID: fd.ID, FeedURL: fd.URL, Subscribable: sb.Name, Subject: msg.Subject})
			reqs = append(reqs, notifier.Request{Flow: Name, Event: "feed." + h.State, Subject: clip("feed:"+fd.ID, notifier.MaxSubjectLen),
				SubscriberID: sub.SubscriberID, DestinationID: sub.DestinationID, Window: window, Title: clip(msg.Subject, notifier.MaxTextLen),
				Text: msg.Text, Payload: body, ObservedAt: h.Since, EventID: clip(fd.ID+":"+window, 128)})
		}
	}
	if err := errors.Join(append(errs, f.notify(ctx, reqs))...); err != nil {
		return fmt.Errorf("feed: tell the subscribers of %s: %w", fd.ID, err)
	}
	h.Told = true
	return recordstore.InHash[Halt](f.rdb, defsKey("halted")).Put(ctx, fd.ID, h)
}

// renderHalt is the message telling that a feed is no longer polled.
func renderHalt(fd Feed, h Halt) Message {
	subject, why := "Feed gone: "+fd.URL, "The server says the feed is gone for good (HTTP 410)."
	if h.State == FeedDead {
		subject, why = "Feed unreachable: "+fd.URL, "Its polls failed too many times in a row ("+h.Reason+")."
	}
	text := "The feed " + fd.URL + " is no longer polled since " + h.Since.Format(time.RFC3339) + ". " + why +
		" No new items will be sent from it until it is resumed."
	return Message{Kind: h.State, FeedID: fd.ID, FeedURL: fd.URL, Subject: clip(subject, notifier.MaxTextLen), Text: clip(text, notifier.MaxTextLen)}
}

// Resume polls a gone or dead feed again, at once, with its failures
// forgotten. ErrNotFound when there is no such feed.
func (f *Flow) Resume(ctx context.Context, id string) error {
	if _, err := f.store.Feed(ctx, id); err != nil {
		return err
	}
	pipe := f.rdb.TxPipeline()
	pipe.HDel(ctx, defsKey("halted"), id)
	pipe.HDel(ctx, defsKey("failures"), id)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("feed: resume %s: %w", id, err)
	}
	return nil
}
