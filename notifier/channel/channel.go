// Package channel defines the notifier's Channel, Notification and
// DeliveryError without importing the notifier, so a channel package
// (email) can implement it. Package notifier aliases the same types.
package channel

import (
	"context"
	"strconv"
	"time"

	"github.com/dropstream/dropstream/internal/egress"
)

// Channel delivers notifications over one medium; safe for concurrent use.
type Channel interface {
	// Name is the channel's name, as destination kinds name it.
	Name() string
	// Send delivers n once: nil when delivered, a stream.Permanent error
	// when no retry can succeed, any other error when one may.
	Send(ctx context.Context, n Notification) error
}

// Recipient is who a notification goes to, in channel terms.
type Recipient struct {
	// ID identifies the subscription (a watcher id).
	ID string
	// Address is where the channel sends: the webhook URL; empty for log.
	Address string
	// Secret signs the notification (webhook HMAC key).
	Secret string
}

// Notification is one message to one recipient, whatever the flow.
type Notification struct {
	// Flow names the domain flow, e.g. "avail".
	Flow string
	// Event names what happened, e.g. "availability.open".
	Event string
	// Recipient is who receives it.
	Recipient Recipient
	// EventID identifies the event; receivers dedupe on (recipient, id).
	EventID string
	// SessionID identifies the open window, when known.
	SessionID string
	// Subject is what the notification is about, e.g. an entity key.
	Subject string
	// TraceID is the trace that produced the event.
	TraceID string
	// ObservedAt is when the change was observed; latency counts from it.
	ObservedAt time.Time
	// Body is the JSON document the channel sends (the webhook body).
	Body []byte
	// Title is a one-line summary (email subject, Slack text).
	Title string
	// Text is a short human text (the email body's first paragraph).
	Text string
	// HTML is Text as an HTML fragment (Request.HTML), for the email body.
	HTML string
	// UnsubscribeURL is the recipient's unsubscribe link, when it has one.
	UnsubscribeURL string
}

// DeliveryError is a failed send's error, wrapped in stream.Permanent when
// Retryable is false.
type DeliveryError struct {
	// Channel is the channel's name.
	Channel string
	// StatusCode is the HTTP status or SMTP code of the answer; 0 if none.
	StatusCode int
	// Class is the kind of failure (egress.Classify).
	Class egress.Class
	// Retryable is true when a later try may succeed.
	Retryable bool
	// Detail is the sender's own reason (never the receiver's words).
	Detail string
	// RetryAfter is the receiver's Retry-After (429, 503); 0 if none.
	RetryAfter time.Duration
	// Err is the underlying error, kept out of Error's text (it may quote
	// the receiver).
	Err error
}

func (e *DeliveryError) Error() string {
	s := e.Channel + " delivery failed"
	if e.Class != egress.ClassNone {
		s += " (" + string(e.Class) + ")"
	}
	if e.StatusCode != 0 {
		s += ": status " + strconv.Itoa(e.StatusCode)
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

func (e *DeliveryError) Unwrap() error { return e.Err }
