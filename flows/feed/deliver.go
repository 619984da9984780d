package feed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/stream"
)

// handleCollection delivers a completed collection to every confirmed
// subscription, deletes subscriptions whose notifier destination is gone,
// then releases the items.
func (f *Flow) handleCollection(ctx context.Context, m *stream.Message) error {
	switch m.Type {
	case TypeCollection:
	case typeConfirm:
		return fmt.Errorf("feed: confirmation requests go through the notifier now: %w", stream.ErrDrop)
	default:
		return stream.Permanentf("feed: unexpected message type %q", clip(m.Type, 64))
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
	f.collections.Add(ctx, 1, metric.WithAttributes(attribute.String("step", "delivered")))
	if f.crashPoint != nil {
		if err := f.crashPoint("delivered", m); err != nil {
			return err
		}
	}
	prefix := f.topics.feedPrefix(c.FeedID)
	part := f.topics.Polls.Partition(c.FeedID)
	if err := cleanupScript.Run(ctx, f.rdb, []string{prefix + "meta"}, prefix, strconv.FormatInt(time.Now().UnixMilli(), 10),
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
			errs = append(errs, f.sendLog(ctx, m, sub, c, msg, traceID))
		default:
			if body == nil {
				body = payload(msg)
			}
			reqs = append(reqs, collectionRequest(sub, c, msg, body, traceID))
		}
	}
	for start := 0; start < len(reqs); start += publishChunk {
		err := f.deps.Notify(ctx, reqs[start:min(start+publishChunk, len(reqs))]...)
		if errors.Is(err, notifier.ErrInvalidRequest) {
			err = stream.Permanent(err)
		}
		if err != nil {
			errs = append(errs, err)
			break
		}
	}
	return settle(errs)
}

// sendLog delivers msg to a log subscription through the Sender, once per
// (collection, subscription).
func (f *Flow) sendLog(ctx context.Context, m *stream.Message, sub Subscription, c Collection, msg Message, traceID string) error {
	eventID := c.FeedID + ":" + c.Subscribable + ":" + c.Within
	msg.SubscriptionID = sub.ID
	_, err := f.deps.Sender.Deliver(ctx, notifier.Delivery{
		HashTag: f.topics.Collections.HashTag(m.Partition), Key: "feed:" + eventID + ":" + strconv.FormatInt(c.OpenedMs, 10) + ":" + sub.ID,
		Channel: notifier.ChannelLog, MessageID: m.ID, Attempt: m.Attempt,
		Notification: notifier.Notification{Flow: Name, Event: "feed." + msg.Kind, EventID: eventID, Subject: msg.Subject,
			Recipient: notifier.Recipient{ID: sub.ID}, TraceID: traceID, ObservedAt: time.UnixMilli(c.CompletedMs), Body: msg.body()},
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
