package notifier

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dropstream/dropstream/notifier/digest"
	"github.com/dropstream/dropstream/notifier/history"
	"github.com/dropstream/dropstream/notifier/subscriber"
	"github.com/dropstream/dropstream/stream"
)

// deliverTo applies the target's preferences to the request and either
// drops it (suppressed), files it in a digest window (quiet hours, digest
// policy) or sends it through the ledger, throttled, and records the
// outcome in the history.
func (d *Deliverer) deliverTo(ctx context.Context, m *stream.Message, r Request, t target) error {
	channel := t.dest.Channel()
	key := requestKey(r, t.subscriberID, t.dest.ID)
	rec := history.Record{ID: NotificationID(key), Flow: r.Flow, Event: r.Event, SubscriberID: t.subscriberID, DestinationID: t.dest.ID,
		Channel: channel, Subject: r.Subject, Window: r.Window, Attempts: m.Attempt, Critical: r.Critical, ObservedAt: r.ObservedAt,
		TraceID: r.TraceID, EventID: r.EventID, RunID: r.RunID, MessageID: m.ID}
	tag := d.topic.HashTag(m.Partition)
	if t.prefs != nil {
		if t.dest.Status != subscriber.StatusActive || !t.prefs.ChannelOn(channel) || (!r.Digest && !t.prefs.Wants(r.Subject)) {
			return d.record(ctx, rec, history.StatusSuppressed, nil)
		}
		if !r.Critical && !r.Digest {
			held, err := d.hold(ctx, m, r, t, key, tag)
			if err != nil || held != "" {
				if err != nil {
					return err
				}
				return d.record(ctx, rec, held, nil)
			}
		}
	}
	body, err := d.render(r, t, rec.ID)
	if err != nil {
		return stream.Permanent(err)
	}
	throttleKey := t.dest.ID
	if core, err := t.dest.Core(); err == nil {
		throttleKey = subscriber.CoreHash(core)
	}
	del := Delivery{HashTag: tag, Key: key, Channel: channel, MessageID: m.ID, Attempt: m.Attempt,
		Notification: Notification{Flow: r.Flow, Event: r.Event,
			Recipient: Recipient{ID: t.subscriberID, Address: t.dest.Address, Secret: t.dest.Secret},
			EventID:   rec.ID, Subject: r.Subject, TraceID: r.TraceID, ObservedAt: r.ObservedAt, Body: body,
			Title: r.Title, Text: r.Text, UnsubscribeURL: d.unsubscribeURL(t.dest)},
		Before: func(ctx context.Context) error { return d.waitThrottle(ctx, throttleKey, channel) }}
	outcome, err := d.dispatch.Deliver(ctx, del)
	switch {
	case err == nil && outcome == OutcomeDuplicate:
		return nil // recorded when it was sent
	case err == nil:
		return d.record(ctx, rec, history.StatusSent, nil)
	}
	var de *DeliveryError
	if errors.As(err, &de) && de.RetryAfter > 0 && d.throttle != nil {
		if berr := d.throttle.Block(ctx, throttleKey, d.cfg.Now().Add(de.RetryAfter)); berr != nil {
			d.logger.WarnContext(ctx, "notifier: retry-after not recorded", "error", berr)
		}
	}
	status := history.StatusFailed
	if stream.IsPermanent(err) {
		status = history.StatusRejected
	}
	if errors.Is(err, ErrInFlight) {
		return err // another copy is sending it; it records the outcome
	}
	_ = d.record(ctx, rec, status, err)
	return err
}

// hold files a non-critical request in a quiet-hours hold or a digest
// window and returns the history status, or "" when it is to be sent now.
// Windows are chosen by the message's publication time, so a redelivered
// message lands in the same window.
func (d *Deliverer) hold(ctx context.Context, m *stream.Message, r Request, t target, key, tag string) (string, error) {
	at := m.PublishedAt()
	if at.IsZero() {
		at = d.cfg.Now()
	}
	batch := t.subscriberID + "|" + t.dest.ID
	item, err := json.Marshal(r)
	if err != nil {
		return "", stream.Permanent(fmt.Errorf("notifier: encode digest item: %w", err))
	}
	if quiet, end := t.prefs.QuietHours.Quiet(at, t.loc); quiet {
		w := digest.Window{ID: "quiet:" + end.UTC().Format("2006-01-02T15:04Z"), End: end}
		return history.StatusHeld, d.digests.AddTimed(ctx, tag, batch, key, item, w)
	}
	p := t.prefs.Digest
	switch {
	case !p.Batches():
		return "", nil
	case p.Mode == digest.ModeEvery:
		_, err := d.digests.AddCounted(ctx, tag, batch, key, item, p, d.cfg.Now())
		return history.StatusBatched, err
	}
	w, err := p.TimeWindow(at, t.loc)
	if err != nil {
		return "", stream.Permanent(err)
	}
	return history.StatusBatched, d.digests.AddTimed(ctx, tag, batch, key, item, w)
}

// waitThrottle waits for the throttle's permission up to MaxThrottleWait.
func (d *Deliverer) waitThrottle(ctx context.Context, dest, channel string) error {
	if d.throttle == nil {
		return nil
	}
	deadline := time.Now().Add(d.cfg.MaxThrottleWait)
	for {
		wait, err := d.throttle.Take(ctx, dest, channel)
		if err != nil || wait == 0 {
			return err
		}
		if time.Now().Add(wait).After(deadline) {
			return fmt.Errorf("%w: %s on %s for %s", ErrThrottled, dest, channel, wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// record writes a history record (logging a failure: history must not fail
// a delivery).
func (d *Deliverer) record(ctx context.Context, rec history.Record, status string, cause error) error {
	if d.history == nil {
		return nil
	}
	rec.Status, rec.At = status, time.Now().UTC()
	if status == history.StatusSent && !rec.ObservedAt.IsZero() {
		rec.LatencyMs = max(rec.At.Sub(rec.ObservedAt).Milliseconds(), 0)
	}
	if cause != nil {
		rec.Error = clipReason(cause.Error())
	}
	if buf, ok := ctx.Value(recordBufferKey{}).(*recordBuffer); ok {
		buf.add(rec)
		return nil
	}
	// Recorded even when the handler's deadline has passed: the send
	// happened.
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	if err := d.history.Record(hctx, rec); err != nil {
		d.logger.WarnContext(ctx, "notifier: history not recorded", "notification_id", rec.ID, "error", err)
	}
	return nil
}

// Message is the JSON body a webhook or comic endpoint receives for a
// request: the envelope around the flow's payload.
type Message struct {
	ID             string          `json:"id"`
	Flow           string          `json:"flow"`
	Event          string          `json:"event"`
	Subject        string          `json:"subject"`
	SubscriberID   string          `json:"subscriber_id"`
	DestinationID  string          `json:"destination_id"`
	Window         string          `json:"window"`
	Critical       bool            `json:"critical,omitempty"`
	Digest         bool            `json:"digest,omitempty"`
	Title          string          `json:"title,omitempty"`
	Text           string          `json:"text,omitempty"`
	Payload        json.RawMessage `json:"payload,omitempty"`
	ObservedAt     time.Time       `json:"observed_at,omitzero"`
	TraceID        string          `json:"trace_id,omitempty"`
	UnsubscribeURL string          `json:"unsubscribe_url,omitempty"`
}

func (d *Deliverer) render(r Request, t target, id string) ([]byte, error) {
	body, err := json.Marshal(Message{ID: id, Flow: r.Flow, Event: r.Event, Subject: r.Subject, SubscriberID: t.subscriberID,
		DestinationID: t.dest.ID, Window: r.Window, Critical: r.Critical, Digest: r.Digest, Title: r.Title, Text: r.Text,
		Payload: r.Payload, ObservedAt: r.ObservedAt, TraceID: r.TraceID, UnsubscribeURL: d.unsubscribeURL(t.dest)})
	if err != nil {
		return nil, fmt.Errorf("notifier: encode message: %w", err)
	}
	return body, nil
}

// UnsubscribePath is the API path of an unsubscribe link, before the token.
const UnsubscribePath = "/v1/unsubscribe/"

// ConfirmPath is the API path of an opt-in link, before the token.
const ConfirmPath = "/v1/confirm/"

func (d *Deliverer) unsubscribeURL(dest subscriber.Destination) string {
	if dest.UnsubscribeToken == "" {
		return ""
	}
	return d.cfg.PublicURL + UnsubscribePath + dest.UnsubscribeToken
}
