package notifier

import (
	"errors"
	"fmt"
	"time"

	"github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/notifier/history"
	"github.com/dropstream/dropstream/stream"
)

// DefaultClaimIdle is the ClaimIdle of the stages that deliver through a
// Dispatcher; it exceeds three handler calls and the retry pauses, and the
// default send lease.
const DefaultClaimIdle = 2 * time.Minute

// Settle turns the errors of one message's deliveries into the message's:
// retryable if any is (the permanent ones are named but not wrapped, so
// the message is retried), permanent if all failures are, nil if none
// failed.
func Settle(errs []error) error {
	var retry, perm []error
	for _, err := range errs {
		switch {
		case err == nil:
		case stream.IsPermanent(err):
			perm = append(perm, err)
		default:
			retry = append(retry, err)
		}
	}
	switch {
	case len(retry) > 0 && len(perm) > 0:
		return fmt.Errorf("notifier: %d of %d deliveries failed: %w (and %d refused: %s)",
			len(retry), len(errs), errors.Join(retry...), len(perm), errors.Join(perm...).Error())
	case len(retry) > 0:
		return fmt.Errorf("notifier: %d of %d deliveries failed: %w", len(retry), len(errs), errors.Join(retry...))
	case len(perm) > 0:
		return stream.Permanent(fmt.Errorf("notifier: %d of %d deliveries refused: %w", len(perm), len(errs), errors.Join(perm...)))
	}
	return nil
}

// HistoryRecord returns the history record of the outcome of Deliver(del)
// at the time at: sent (with the latency from ObservedAt), rejected (a
// permanent error) or failed (any other), under the notification id of
// del.Key, its subscriber the recipient and its window the event id. ok is
// false when there is nothing to record: a duplicate, or a delivery in
// flight elsewhere.
func (del Delivery) HistoryRecord(outcome string, err error, at time.Time) (rec history.Record, ok bool) {
	if outcome == OutcomeDuplicate || errors.Is(err, ErrInFlight) {
		return history.Record{}, false
	}
	n := del.Notification
	rec = history.Record{ID: NotificationID(del.Key), Flow: n.Flow, Event: n.Event, SubscriberID: n.Recipient.ID, Channel: del.Channel,
		Subject: n.Subject, Window: n.EventID, Status: history.StatusSent, Attempts: del.Attempt, ObservedAt: n.ObservedAt,
		At: at, TraceID: n.TraceID, EventID: n.EventID, MessageID: del.MessageID}
	switch {
	case err == nil:
		if !n.ObservedAt.IsZero() {
			rec.LatencyMs = max(at.Sub(n.ObservedAt).Milliseconds(), 0)
		}
	case stream.IsPermanent(err):
		rec.Status, rec.Error = history.StatusRejected, clip.String(err.Error(), maxReason)
	default:
		rec.Status, rec.Error = history.StatusFailed, clip.String(err.Error(), maxReason)
	}
	return rec, true
}
