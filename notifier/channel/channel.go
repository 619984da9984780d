// Package channel holds what a notifier channel is: the Channel interface,
// the Notification it sends and the DeliveryError of a failed send. It
// imports nothing of the notifier, so a channel package (email) implements
// it without importing the notifier, and the notifier can build it. The
// notifier package names the same types (notifier.Channel and so on).
package channel

import (
	"context"
	"strconv"
	"time"

	"github.com/dropstream/dropstream/internal/egress"
)

// Channel delivers notifications over one medium (webhook, Slack-style
// webhook, log, email). Implementations are safe for concurrent use.
type Channel interface {
	// Name is the channel's name, as destination kinds and watchers name
	// it.
	Name() string
	// Send delivers n once. It returns nil when the recipient has the
	// notification; an error marked stream.Permanent when no retry can
	// succeed (the recipient refused it); any other error when a later try
	// may succeed. Send honours ctx's deadline and cancellation.
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
	// EventID identifies the event notified; receivers dedupe on
	// (recipient, event id). Sent as X-Dropstream-Event-Id.
	EventID string
	// SessionID identifies the open window, when known.
	SessionID string
	// Subject is what the notification is about, e.g. an entity key.
	Subject string
	// TraceID is the trace that produced the event.
	TraceID string
	// ObservedAt is when the change was observed (the run's time); the
	// end-to-end latency is measured from it.
	ObservedAt time.Time
	// Body is the JSON document the channel sends (the webhook body).
	Body []byte
	// Title is a one-line human summary (the email subject, the Slack
	// text); empty for availability notifications.
	Title string
	// Text is a short human text (the email body's first paragraph).
	Text string
	// HTML is Text as an HTML fragment, when the request has one
	// (Request.HTML): the email's HTML body shows it in place of Text.
	HTML string
	// UnsubscribeURL is the recipient's unsubscribe link, when it has one.
	UnsubscribeURL string
}

// DeliveryError is the error of a failed send, for errors.As. Channels wrap
// it with stream.Permanent when Retryable is false.
type DeliveryError struct {
	// Channel is the channel's name.
	Channel string
	// StatusCode is the HTTP status (or SMTP reply code) of the answer; 0
	// when there was none.
	StatusCode int
	// Class is the kind of failure (egress.Classify): with StatusCode, all
	// that is kept of the receiver's answer.
	Class egress.Class
	// Retryable is true when a later try may succeed.
	Retryable bool
	// Detail is the sender's own reason (never the receiver's words).
	Detail string
	// RetryAfter is the receiver's Retry-After (on 429 or 503); 0 when it
	// gave none.
	RetryAfter time.Duration
	// Err is the underlying error, if any: for errors.Is and As, never
	// in Error's text (a transport's error may quote the receiver or a
	// redirect's target).
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
