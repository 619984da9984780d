package notifier

import (
	"errors"
	"fmt"
	"time"

	"github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/notifier/history"
	"github.com/dropstream/dropstream/stream"
)

// DefaultClaimIdle is the ClaimIdle of stages delivering via a Dispatcher;
// above three handler calls, retry pauses and the send lease.
const DefaultClaimIdle = 2 * time.Minute

// Settle turns a message's delivery errors into its error: retryable if
// any is, permanent if all failures are, nil if none failed.
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

// HistoryRecord returns the history record of Deliver(del)'s outcome at
// at: sent, rejected (permanent) or failed. ok is false for a duplicate or
// a delivery in flight elsewhere.
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
