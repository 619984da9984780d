package history

import (
	"github.com/dropstream/dropstream/notifier/internal/jsonenc"
)

// appendJSON appends rec as json.Marshal encodes it.
func (rec *Record) appendJSON(b []byte) ([]byte, error) {
	b = append(b, '{')
	b = jsonenc.String(jsonenc.Field(b, "id", true), rec.ID)
	b = jsonenc.String(jsonenc.Field(b, "flow", false), rec.Flow)
	b = jsonenc.String(jsonenc.Field(b, "event", false), rec.Event)
	b = jsonenc.String(jsonenc.Field(b, "subscriber_id", false), rec.SubscriberID)
	if rec.DestinationID != "" {
		b = jsonenc.String(jsonenc.Field(b, "destination_id", false), rec.DestinationID)
	}
	b = jsonenc.String(jsonenc.Field(b, "channel", false), rec.Channel)
	b = jsonenc.String(jsonenc.Field(b, "subject", false), rec.Subject)
	b = jsonenc.String(jsonenc.Field(b, "window", false), rec.Window)
	b = jsonenc.String(jsonenc.Field(b, "status", false), rec.Status)
	b = jsonenc.Int(jsonenc.Field(b, "attempts", false), int64(rec.Attempts))
	if rec.Critical {
		b = jsonenc.Bool(jsonenc.Field(b, "critical", false), true)
	}
	var err error
	if !rec.ObservedAt.IsZero() {
		if b, err = jsonenc.Time(jsonenc.Field(b, "observed_at", false), rec.ObservedAt); err != nil {
			return b, err
		}
	}
	if b, err = jsonenc.Time(jsonenc.Field(b, "at", false), rec.At); err != nil {
		return b, err
	}
	b = jsonenc.Int(jsonenc.Field(b, "latency_ms", false), rec.LatencyMs)
	for _, f := range [...]struct{ name, v string }{{"trace_id", rec.TraceID}, {"event_id", rec.EventID}, {"run_id", rec.RunID},
		{"message_id", rec.MessageID}, {"error", rec.Error}} {
		if f.v != "" {
			b = jsonenc.String(jsonenc.Field(b, f.name, false), f.v)
		}
	}
	return append(b, '}'), nil
}
