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
	"go.opentelemetry.io/otel/trace"

	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/stream"
)

// handleCollection delivers a completed collection to every confirmed
// subscription of its subscribable, once per (collection, subscription)
// through the Sender's ledger, then releases the collection's items; or
// sends a confirmation request.
func (f *Flow) handleCollection(ctx context.Context, m *stream.Message) error {
	switch m.Type {
	case TypeConfirm:
		return f.handleConfirm(ctx, m)
	case TypeCollection:
	default:
		return stream.Permanentf("feed: unexpected message type %q", clip(m.Type, 64))
	}
	c, err := decode[Collection](m, TypeCollection)
	if err != nil {
		return err
	}
	if !validID(c.FeedID) || !validName(c.Subscribable) || c.Within == "" || len(c.Within) > 64 {
		return stream.Permanentf("feed: collection %q/%q/%q malformed", clip(c.FeedID, 64), clip(c.Subscribable, 64), clip(c.Within, 64))
	}
	fd, err := f.store.Feed(ctx, c.FeedID)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	var subs []Subscription
	if err == nil {
		if subs, err = f.store.Subscriptions(ctx, c.FeedID, c.Subscribable, true); err != nil {
			return err
		}
	}
	var errs []error
	for _, sub := range subs {
		msg, err := renderCollection(f.cfg.PublicURL, fd, sub, c)
		if err != nil {
			return stream.Permanent(err)
		}
		eventID := c.FeedID + ":" + c.Subscribable + ":" + c.Within
		if err := f.send(ctx, m, sub, "feed:"+eventID+":"+sub.ID, c.Within, eventID, msg, time.UnixMilli(c.CompletedMs)); err != nil {
			errs = append(errs, err)
		}
	}
	if err := settle(errs); err != nil {
		return err
	}
	f.collections.Add(ctx, 1, metric.WithAttributes(attribute.String("step", "delivered")))
	prefix := f.topics.feedPrefix(c.FeedID)
	part := f.topics.Polls.Partition(c.FeedID)
	if err := cleanupScript.Run(ctx, f.rdb, []string{prefix + "meta"}, prefix, strconv.FormatInt(time.Now().UnixMilli(), 10),
		f.topics.History.Stream(part), m.Metadata[stream.MetaTraceParent], c.FeedID, c.Subscribable, c.Within).Err(); err != nil {
		return fmt.Errorf("feed: release collection %s/%s: %w", c.Subscribable, c.Within, err)
	}
	return nil
}

// handleConfirm sends a subscription its confirmation request, once.
func (f *Flow) handleConfirm(ctx context.Context, m *stream.Message) error {
	r, err := decode[ConfirmRequest](m, TypeConfirm)
	if err != nil {
		return err
	}
	sub, err := f.store.Subscription(ctx, r.SubscriptionID)
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("subscription %s is gone: %w", clip(r.SubscriptionID, 64), stream.ErrDrop)
	}
	if err != nil {
		return err
	}
	if sub.Confirmed {
		return nil
	}
	fd, err := f.store.Feed(ctx, sub.FeedID)
	if err != nil {
		return fmt.Errorf("feed of subscription %s: %w", sub.ID, err)
	}
	msg, err := renderConfirm(f.cfg.PublicURL, fd, sub)
	if err != nil {
		return stream.Permanent(err)
	}
	return f.send(ctx, m, sub, "feed-confirm:"+sub.ID, "confirm:"+sub.ID, "confirm:"+sub.ID, msg, m.PublishedAt())
}

// send delivers msg to one subscription: through the notifier's request
// path (Config.Relay) for e-mail and webhook destinations when configured,
// else through the Sender, once per key. window names the collection (or
// confirmation) within the subscription's subject.
func (f *Flow) send(ctx context.Context, m *stream.Message, sub Subscription, key, window, eventID string, msg Message, observed time.Time) error {
	traceID := ""
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		traceID = sc.TraceID().String()
	}
	if f.cfg.Relay != nil && (sub.Destination.Kind == DestEmail || sub.Destination.Kind == DestWebhook) {
		err := f.cfg.Relay(ctx, relayRequest(sub, window, eventID, msg, observed, traceID))
		if errors.Is(err, notifier.ErrInvalidRequest) {
			return stream.Permanent(err)
		}
		return err
	}
	_, err := f.sender.Deliver(ctx, notifier.Delivery{
		HashTag: f.topics.Collections.HashTag(m.Partition), Key: key, Channel: sub.Destination.Channel(),
		MessageID: m.ID, Attempt: m.Attempt,
		Notification: notifier.Notification{Flow: FlowName, Event: "feed." + msg.Kind, EventID: eventID, Subject: msg.Subject,
			Recipient: notifier.Recipient{ID: sub.ID, Address: sub.Destination.address(), Secret: sub.Secret},
			TraceID:   traceID, ObservedAt: observed, Body: msg.body()},
	})
	return err
}

// settle turns per-recipient errors into the message's outcome: retry
// while any is retryable (recipients already served are skipped next
// time), dead-letter when all are permanent.
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

func jsonMarshal(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}
