package notifier

import (
	"fmt"

	"github.com/dropstream/dropstream/notifier/internal/jsonenc"
)

// appendJSON appends rec as json.Marshal encodes it.
func (rec *DeliveryRecord) appendJSON(b []byte) ([]byte, error) {
	b = append(b, '{')
	b = jsonenc.String(jsonenc.Field(b, "state", true), string(rec.State))
	b = jsonenc.String(jsonenc.Field(b, "flow", false), rec.Flow)
	b = jsonenc.String(jsonenc.Field(b, "channel", false), rec.Channel)
	b = jsonenc.String(jsonenc.Field(b, "recipient_id", false), rec.RecipientID)
	b = jsonenc.String(jsonenc.Field(b, "event_id", false), rec.EventID)
	for _, f := range [...]struct{ name, v string }{{"session_id", rec.SessionID}, {"subject", rec.Subject}, {"trace_id", rec.TraceID}} {
		if f.v != "" {
			b = jsonenc.String(jsonenc.Field(b, f.name, false), f.v)
		}
	}
	b = jsonenc.String(jsonenc.Field(b, "message_id", false), rec.MessageID)
	b = jsonenc.Int(jsonenc.Field(b, "attempt", false), int64(rec.Attempt))
	b = jsonenc.String(jsonenc.Field(b, "token", false), rec.Token)
	var err error
	if b, err = jsonenc.Time(jsonenc.Field(b, "started_at", false), rec.StartedAt); err != nil {
		return b, fmt.Errorf("notifier: encode delivery record: %w", err)
	}
	if !rec.SentAt.IsZero() {
		if b, err = jsonenc.Time(jsonenc.Field(b, "sent_at", false), rec.SentAt); err != nil {
			return b, fmt.Errorf("notifier: encode delivery record: %w", err)
		}
	}
	if rec.Error != "" {
		b = jsonenc.String(jsonenc.Field(b, "error", false), rec.Error)
	}
	return append(b, '}'), nil
}

// appendJSON appends m as json.Marshal encodes it.
func (m *Message) appendJSON(b []byte) ([]byte, error) {
	b = append(b, '{')
	b = jsonenc.String(jsonenc.Field(b, "id", true), m.ID)
	b = jsonenc.String(jsonenc.Field(b, "flow", false), m.Flow)
	b = jsonenc.String(jsonenc.Field(b, "event", false), m.Event)
	b = jsonenc.String(jsonenc.Field(b, "subject", false), m.Subject)
	b = jsonenc.String(jsonenc.Field(b, "subscriber_id", false), m.SubscriberID)
	b = jsonenc.String(jsonenc.Field(b, "destination_id", false), m.DestinationID)
	b = jsonenc.String(jsonenc.Field(b, "window", false), m.Window)
	if m.Critical {
		b = jsonenc.Bool(jsonenc.Field(b, "critical", false), true)
	}
	if m.Digest {
		b = jsonenc.Bool(jsonenc.Field(b, "digest", false), true)
	}
	if m.Title != "" {
		b = jsonenc.String(jsonenc.Field(b, "title", false), m.Title)
	}
	if m.Text != "" {
		b = jsonenc.String(jsonenc.Field(b, "text", false), m.Text)
	}
	var err error
	if len(m.Payload) > 0 {
		if b, err = jsonenc.Raw(jsonenc.Field(b, "payload", false), m.Payload); err != nil {
			return b, fmt.Errorf("notifier: encode message: %w", err)
		}
	}
	if !m.ObservedAt.IsZero() {
		if b, err = jsonenc.Time(jsonenc.Field(b, "observed_at", false), m.ObservedAt); err != nil {
			return b, fmt.Errorf("notifier: encode message: %w", err)
		}
	}
	if m.TraceID != "" {
		b = jsonenc.String(jsonenc.Field(b, "trace_id", false), m.TraceID)
	}
	if m.UnsubscribeURL != "" {
		b = jsonenc.String(jsonenc.Field(b, "unsubscribe_url", false), m.UnsubscribeURL)
	}
	return append(b, '}'), nil
}
