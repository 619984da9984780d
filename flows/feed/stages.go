package feed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/flows/feed/poll"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/stream"
)

// handlePoll applies a poll: observe its items, then assign and complete.
func (f *Flow) handlePoll(ctx context.Context, m *stream.Message) error {
	p, err := decode[Poll](m, TypePoll)
	if err != nil {
		return err
	}
	if !validID(p.FeedID) || p.PolledAtMs <= 0 {
		return stream.Permanentf("feed: poll with feed id %q and time %d", clip(p.FeedID, 64), p.PolledAtMs)
	}
	if len(p.Items) > poll.MaxItems {
		return stream.Permanentf("feed: poll of %s with %d items, above %d", p.FeedID, len(p.Items), poll.MaxItems)
	}
	for _, it := range p.Items {
		if it.GUID == "" || len(it.GUID) > poll.MaxGUIDBytes+80 || it.Hash == "" || len(it.Hash) > 64 {
			return stream.Permanentf("feed: poll of %s has an item without a bounded guid and hash", p.FeedID)
		}
	}
	fd, err := f.store.Feed(ctx, p.FeedID)
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("feed %s was deleted: %w", p.FeedID, stream.ErrDrop)
	}
	if err != nil {
		return err
	}
	if p.MissingGUIDs > 0 {
		f.guidWarnings.Add(ctx, int64(p.MissingGUIDs), metric.WithAttributeSet(attrSet("reason", "missing")))
	}
	if p.DuplicateGUIDs > 0 {
		f.guidWarnings.Add(ctx, int64(p.DuplicateGUIDs), metric.WithAttributeSet(attrSet("reason", "duplicate")))
	}
	prefix := f.topics.feedPrefix(p.FeedID)
	part := f.topics.Polls.Partition(p.FeedID)
	tp := m.TraceParent
	now := p.PolledAtMs
	if p.OK && !p.NotModified {
		args := make([]any, 0, 7+6*len(p.Items))
		args = append(args, prefix, now, flag(fd.IncludeExisting), f.topics.History.Stream(part), tp, p.FeedID, f.cfg.Etiquette.History)
		for i, it := range p.Items {
			content, _ := json.Marshal(it)
			args = append(args, IID(it.GUID), it.GUID, it.Hash, content, p.PolledAtMs*1000+int64(i), Fingerprint(it))
		}
		res, err := observeScript.Run(ctx, f.rdb, []string{prefix + "meta"}, args...).Int64Slice()
		if err != nil {
			return fmt.Errorf("feed: observe %s: %w", p.FeedID, err)
		}
		if res[0] < 0 {
			return fmt.Errorf("feed: poll of %s at %d is older than the newest applied: %w", p.FeedID, p.PolledAtMs, stream.ErrDrop)
		}
		f.items.Add(ctx, res[1], metric.WithAttributeSet(attrSet("step", "new")))
		f.items.Add(ctx, res[2], metric.WithAttributeSet(attrSet("step", "edited")))
		if res[3] > 0 {
			f.held.Add(ctx, res[3])
		}
	}
	if f.crashPoint != nil {
		if err := f.crashPoint("observed", m); err != nil {
			return err
		}
	}
	subs, err := f.store.Subscribables(ctx, p.FeedID)
	if err != nil {
		return err
	}
	args := []any{prefix, now, minutes(fd.MinDelayMinutes).Milliseconds(), minutes(fd.AwaitStabilizationMinutes).Milliseconds(),
		minutes(fd.MaxDelayMinutes).Milliseconds(), f.topics.Collections.Stream(part), f.topics.History.Stream(part), tp, p.FeedID, f.cfg.AssignLimit, f.cfg.CollectionItems, flag(p.OK)}
	for _, sb := range subs {
		within, due := "", int64(noDue)
		if w, d, ok := sb.Manager.Window(p.PolledAt()); ok {
			within, due = w, d.UnixMilli()
		}
		args = append(args, sb.Key(), sb.Manager.Kind, within, due, max(sb.Manager.N, 1))
	}
	res, err := assignScript.Run(ctx, f.rdb, []string{prefix + "meta"}, args...).Int64Slice()
	if err != nil {
		return fmt.Errorf("feed: assign %s: %w", p.FeedID, err)
	}
	f.items.Add(ctx, res[0], metric.WithAttributeSet(attrSet("step", "assigned")))
	f.collections.Add(ctx, res[1], metric.WithAttributeSet(attrSet("step", "completed")))
	if f.crashPoint != nil {
		return f.crashPoint("assigned", m)
	}
	return nil
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// Exclude marks an Unassigned item Excluded and returns its state before
// ("" when there is no such item).
func (f *Flow) Exclude(ctx context.Context, feedID, iid string) (string, error) {
	if !validID(feedID) || !validID(iid) {
		return "", ErrNotFound
	}
	prefix := f.topics.feedPrefix(feedID)
	part := f.topics.Polls.Partition(feedID)
	st, err := excludeScript.Run(ctx, f.rdb, []string{prefix + "meta"}, prefix, time.Now().UnixMilli(),
		f.topics.History.Stream(part), "", feedID, iid).Text()
	if err != nil {
		return "", fmt.Errorf("feed: exclude: %w", err)
	}
	return stateNames[st], nil
}

// handleCollection delivers a completed collection to every confirmed
// subscription, deletes subscriptions whose notifier destination is gone,
// then releases the items.
func (f *Flow) handleCollection(ctx context.Context, m *stream.Message) error {
	if m.Type == typeConfirm {
		return fmt.Errorf("feed: confirmation requests go through the notifier now: %w", stream.ErrDrop)
	}
	c, err := decode[Collection](m, TypeCollection)
	if err != nil {
		return err
	}
	if !validID(c.FeedID) || !validKey(c.Subscribable) || c.Within == "" || len(c.Within) > 64 {
		return stream.Permanentf("feed: collection %q/%q/%q malformed", clip(c.FeedID, 64), clip(c.Subscribable, 64), clip(c.Within, 64))
	}
	fd, err := f.store.Feed(ctx, c.FeedID)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	var live, gone []Subscription
	if err == nil {
		subs, err := f.store.Subscriptions(ctx, c.FeedID, c.Subscribable)
		if err != nil {
			return err
		}
		if live, gone, err = f.resolve(ctx, subs); err != nil {
			return err
		}
	}
	for _, sub := range gone {
		if err := f.store.DeleteSubscription(ctx, sub.ID); err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
	}
	if err := f.deliver(ctx, m, fd, c, live); err != nil {
		return err
	}
	f.collections.Add(ctx, 1, metric.WithAttributeSet(attrSet("step", "delivered")))
	if f.crashPoint != nil {
		if err := f.crashPoint("delivered", m); err != nil {
			return err
		}
	}
	prefix := f.topics.feedPrefix(c.FeedID)
	part := f.topics.Polls.Partition(c.FeedID)
	if err := cleanupScript.Run(ctx, f.rdb, []string{prefix + "meta"}, prefix, time.Now().UnixMilli(),
		f.topics.History.Stream(part), m.TraceParent, c.FeedID, c.Subscribable, c.Within).Err(); err != nil {
		return fmt.Errorf("feed: release collection %s/%s: %w", c.Subscribable, c.Within, err)
	}
	return nil
}

// publishChunk bounds the requests of one publish.
const publishChunk = 500

// deliver renders the collection once and sends it to the confirmed
// subscriptions among subs.
func (f *Flow) deliver(ctx context.Context, m *stream.Message, fd Feed, c Collection, subs []Subscription) error {
	if len(subs) == 0 {
		return nil
	}
	msg, err := renderCollection(fd, c)
	if err != nil {
		return stream.Permanent(err)
	}
	traceID := flow.TraceIDFrom(ctx)
	var body json.RawMessage
	var reqs []notifier.Request
	var errs []error
	for _, sub := range subs {
		switch {
		case !sub.Confirmed:
		case sub.Destination.Kind == DestLog:
			eventID := c.FeedID + ":" + c.Subscribable + ":" + c.Within
			errs = append(errs, f.sendLog(ctx, sub, msg, eventID, eventID+":"+fmt.Sprint(c.OpenedMs), m.ID, m.Attempt, time.UnixMilli(c.CompletedMs), traceID))
		default:
			if body == nil {
				body = payload(msg)
			}
			// The window names the collection: the notifier delivers it once.
			reqs = append(reqs, notifier.Request{Flow: Name, Event: "feed.collection", Subject: clip(subject(c.FeedID, displayName(c.Subscribable)), notifier.MaxSubjectLen),
				SubscriberID: sub.SubscriberID, DestinationID: sub.DestinationID,
				Window: clip(c.Within+"@"+fmt.Sprint(c.OpenedMs), notifier.MaxWindowLen), Title: clip(msg.Subject, notifier.MaxTextLen),
				Text: msg.Text, HTML: msg.HTMLBody, Payload: body, ObservedAt: time.UnixMilli(c.CompletedMs), TraceID: traceID,
				EventID: clip(c.FeedID+":"+c.Subscribable+":"+c.Within, 128)})
		}
	}
	if err := f.notify(ctx, reqs); err != nil {
		errs = append(errs, err)
	}
	return settle(errs)
}

// notify hands reqs to the notifier publishChunk at a time, up to the first
// error; a request it refuses as invalid is stream.Permanent.
func (f *Flow) notify(ctx context.Context, reqs []notifier.Request) error {
	for start := 0; start < len(reqs); start += publishChunk {
		err := f.deps.Notify(ctx, reqs[start:min(start+publishChunk, len(reqs))]...)
		if errors.Is(err, notifier.ErrInvalidRequest) {
			return stream.Permanent(err)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// sendLog delivers msg, of the feed msg.FeedID, to a log subscription
// through the Sender, once per (key, subscription).
func (f *Flow) sendLog(ctx context.Context, sub Subscription, msg Message, eventID, key, messageID string, attempt int, at time.Time, traceID string) error {
	msg.SubscriptionID = sub.ID
	body, _ := json.Marshal(msg) // the JSON document a log destination receives
	_, err := f.deps.Sender.Deliver(ctx, notifier.Delivery{
		HashTag: f.topics.Collections.HashTag(f.topics.Collections.Partition(msg.FeedID)), Key: "feed:" + key + ":" + sub.ID,
		Channel: notifier.ChannelLog, MessageID: messageID, Attempt: attempt,
		Notification: notifier.Notification{Flow: Name, Event: "feed." + msg.Kind, EventID: eventID, Subject: msg.Subject,
			Recipient: notifier.Recipient{ID: sub.ID}, TraceID: traceID, ObservedAt: at, Body: body},
	})
	return err
}

// settle retries while any recipient error is retryable (served recipients
// are skipped next time) and dead-letters when all are permanent.
func settle(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	for _, err := range errs {
		if !stream.IsPermanent(err) {
			return errors.Join(errs...)
		}
	}
	return stream.Permanent(errors.Join(errs...))
}

// decode reads a message's JSON payload of the expected type.
func decode[T any](m *stream.Message, typ string) (T, error) {
	var v T
	if m.Type != typ {
		return v, stream.Permanentf("feed: message type %q, want %q", clip(m.Type, 64), typ)
	}
	if err := json.Unmarshal(m.Payload, &v); err != nil {
		return v, stream.Permanentf("feed: decode %s: %w", typ, err)
	}
	return v, nil
}
