package feed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/dropstream/dropstream/internal/recordstore"
	"github.com/dropstream/dropstream/notifier"
)

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
	window := "halt:" + h.State + ":" + strconv.FormatInt(h.Since.UnixMilli(), 10)
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
				m.Subscribable, m.SubscriptionID = sb.Name, sub.ID
				_, err := f.deps.Sender.Deliver(ctx, notifier.Delivery{
					HashTag: f.topics.Collections.HashTag(f.topics.Collections.Partition(fd.ID)),
					Key:     "feed:" + fd.ID + ":" + window + ":" + sub.ID, Channel: notifier.ChannelLog, MessageID: window, Attempt: 1,
					Notification: notifier.Notification{Flow: Name, Event: "feed." + h.State, EventID: fd.ID + ":" + window, Subject: m.Subject,
						Recipient: notifier.Recipient{ID: sub.ID}, ObservedAt: h.Since, Body: m.body()},
				})
				errs = append(errs, err)
				continue
			}
			body, _ := json.Marshal(Message{Kind: msg.Kind, FeedID: fd.ID, FeedURL: fd.URL, Subscribable: sb.Name, Subject: msg.Subject})
			reqs = append(reqs, notifier.Request{Flow: Name, Event: "feed." + h.State, Subject: clip("feed:"+fd.ID, notifier.MaxSubjectLen),
				SubscriberID: sub.SubscriberID, DestinationID: sub.DestinationID, Window: window, Title: clip(msg.Subject, notifier.MaxTextLen),
				Text: msg.Text, Payload: body, ObservedAt: h.Since, EventID: clip(fd.ID+":"+window, 128)})
		}
	}
	for start := 0; start < len(reqs); start += publishChunk {
		if err := f.deps.Notify(ctx, reqs[start:min(start+publishChunk, len(reqs))]...); err != nil {
			errs = append(errs, err)
			break
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("feed: tell the subscribers of %s: %w", fd.ID, err)
	}
	h.Told = true
	b, _ := json.Marshal(h)
	return f.rdb.HSet(ctx, defsKey("halted"), fd.ID, b).Err()
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
