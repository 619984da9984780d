package notifier

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/notifier/subscriber"
	"github.com/dropstream/dropstream/stream"
)

// maxQuoted bounds outside input quoted in an error (clip.Marked).
const maxQuoted = 64

// TypeRequest is the stream message type of a notification request.
const TypeRequest = "notifier.request"

// RequestFlow and RequestTopicName name notify.requests.
const (
	RequestFlow      = "notify"
	RequestTopicName = "requests"
)

// RequestTopic returns the notification request topic.
func RequestTopic(partitions int) stream.Topic {
	return stream.NewTopic(RequestFlow, RequestTopicName, partitions)
}

// Limits of a Request.
const (
	MaxSubjectLen   = 512
	MaxWindowLen    = 128
	MaxTextLen      = 2048
	MaxHTMLLen      = 32 << 10
	MaxRequestBytes = 64 << 10
)

// ErrInvalidRequest is wrapped by Request.Validate's errors.
var ErrInvalidRequest = errors.New("notifier: invalid request")

// Request asks to tell a subscriber (or an inline destination) about a
// subject, once per (subscriber, destination, subject, window).
type Request struct {
	// Flow is the producing flow ("comic", "feed", "checkout", ...).
	Flow string `json:"flow"`
	// Event names what happened ("comic.match").
	Event string `json:"event"`
	// Subject is what it is about, matched by preferences. 1..MaxSubjectLen bytes.
	Subject string `json:"subject"`
	// SubscriberID is told at each active destination (or DestinationID).
	SubscriberID  string `json:"subscriber_id,omitempty"`
	DestinationID string `json:"destination_id,omitempty"`
	// Destination is an inline destination instead; no preferences apply.
	Destination *subscriber.Destination `json:"destination,omitempty"`
	// Window is the window key (e.g. an event id), 1..MaxWindowLen bytes.
	Window string `json:"window"`
	// Critical bypasses quiet hours and digests.
	Critical bool `json:"critical,omitempty"`
	// Title and Text are human texts for email and Slack.
	Title string `json:"title,omitempty"`
	Text  string `json:"text,omitempty"`
	// HTML is Text as an HTML fragment, inserted as is (the flow escapes
	// its data). At most MaxHTMLLen bytes.
	HTML string `json:"html,omitempty"`
	// Payload is the flow's JSON document, the webhook body's "payload".
	Payload json.RawMessage `json:"payload,omitempty"`
	// ObservedAt is when the change was observed, for latency.
	ObservedAt time.Time `json:"observed_at,omitzero"`
	// TraceID is the producer's trace; empty takes the message's.
	TraceID string `json:"trace_id,omitempty"`
	// EventID and RunID name the cause, for GET /v1/notifications/{id}/why.
	EventID string `json:"event_id,omitempty"`
	RunID   string `json:"run_id,omitempty"`
	// Digest marks a digest built by the digest flusher.
	Digest bool `json:"digest,omitempty"`
}

// Validate reports why r cannot be delivered, wrapping ErrInvalidRequest.
func (r Request) Validate() error {
	var errs []error
	for _, f := range []struct {
		name, v string
		max     int
	}{{"flow", r.Flow, 64}, {"event", r.Event, 128}, {"subject", r.Subject, MaxSubjectLen}, {"window", r.Window, MaxWindowLen}} {
		if f.v == "" || len(f.v) > f.max || clip.HasControl(f.v) {
			errs = append(errs, fmt.Errorf("%s: want 1-%d bytes without control characters", f.name, f.max))
		}
	}
	switch {
	case r.SubscriberID == "" && r.Destination == nil:
		errs = append(errs, errors.New("set subscriber_id or destination"))
	case r.Destination == nil && !subscriber.ValidSubscriberID(r.SubscriberID):
		errs = append(errs, errors.New("subscriber_id is not a subscriber id"))
	}
	if r.Destination != nil {
		if _, err := r.Destination.Core(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(r.HTML) > MaxHTMLLen || hasControlHTML(r.HTML) {
		errs = append(errs, fmt.Errorf("html: want at most %d bytes of valid UTF-8", MaxHTMLLen))
	}
	if len(r.Title) > MaxTextLen || len(r.Text) > MaxTextLen || len(r.TraceID) > 64 || len(r.EventID) > 128 || len(r.RunID) > 128 ||
		len(r.SubscriberID) > 64 || len(r.DestinationID) > 64 {
		errs = append(errs, errors.New("title, text, trace, event, run, subscriber or destination id too long"))
	}
	if len(r.Payload) > 0 && !json.Valid(r.Payload) {
		errs = append(errs, errors.New("payload is not JSON"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	return nil
}

// recipientKey is the partition key (subscriber, or inline core), keeping
// a recipient's requests in order.
func (r Request) recipientKey() string {
	if r.SubscriberID != "" {
		return r.SubscriberID
	}
	core, _ := r.Destination.Core()
	return subscriber.CoreHash(core)
}

// PublishRequests validates and publishes reqs to topic in ctx's trace.
func PublishRequests(ctx context.Context, pub *stream.Publisher, topic stream.Topic, reqs ...Request) error {
	msgs := make([]*stream.Message, 0, len(reqs))
	for _, r := range reqs {
		if err := r.Validate(); err != nil {
			return err
		}
		body, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("notifier: encode request: %w", err)
		}
		if len(body) > MaxRequestBytes {
			return fmt.Errorf("%w: %d bytes, limit %d", ErrInvalidRequest, len(body), MaxRequestBytes)
		}
		m := stream.NewMessage(r.recipientKey(), TypeRequest, body)
		m.SetContext(ctx)
		msgs = append(msgs, m)
	}
	return pub.Publish(ctx, topic, msgs...)
}

// NotificationID is "n_" + 24 hex digits of the business key's SHA-256.
func NotificationID(businessKey string) string {
	var buf [256]byte // on the stack: a request's key fits (requestKey)
	sum := sha256.Sum256(append(buf[:0], businessKey...))
	var id [2 + 24]byte
	copy(id[:], "n_")
	hex.Encode(id[2:], sum[:12])
	return string(id[:])
}

// requestKey is a delivery's business key (flow, subscriber, destination,
// subject, window), hashing subject and window past the ledger's bound.
func requestKey(r Request, subscriberID, destID string) string {
	k := r.Flow + ":" + subscriberID + ":" + destID + ":" + r.Subject + ":" + r.Window
	if r.Digest {
		k = "digest:" + subscriberID + ":" + destID + ":" + r.Window
	}
	if len(k) <= 256 {
		return k
	}
	sum := sha256.Sum256([]byte(r.Subject + "\x00" + r.Window))
	return r.Flow + ":" + subscriberID + ":" + destID + ":h" + hex.EncodeToString(sum[:16])
}

// hasControlHTML reports invalid UTF-8 or a control character but \t\n\r.
func hasControlHTML(s string) bool {
	return !utf8.ValidString(s) || strings.ContainsFunc(s, func(c rune) bool {
		return c < 0x20 && c != '\t' && c != '\n' && c != '\r' || c == 0x7f
	})
}
