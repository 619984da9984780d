package watch

import (
	"time"

	"github.com/dropstream/dropstream/avail"
)

// EventAvailabilityOpen is the event of an availability notification.
const EventAvailabilityOpen = "availability.open"

// OpenEvent is the JSON body of an availability notification, as a webhook
// receives it. Receivers verify X-Dropstream-Signature with
// notifier.VerifySignature and dedupe on (watcher_id, event_id): a notification is
// delivered at least once, and more than once only when a send succeeded
// and its record could not be written.
type OpenEvent struct {
	// Event is EventAvailabilityOpen.
	Event string `json:"event"`
	// WatcherID is the watcher notified.
	WatcherID string `json:"watcher_id"`
	// Entity is what opened.
	Entity avail.Entity `json:"entity"`
	// RunAt is when the opening was confirmed (the observing run's time).
	RunAt time.Time `json:"run_at"`
	// EventID is the id of the stable open transition:
	// avail.EventID(run id, entity key, "open", true).
	EventID string `json:"event_id"`
	// SessionID is the open window's id, avail.SessionID(entity key, run id
	// of the raw open that began it); empty when the notifier did not see
	// that raw open.
	SessionID string `json:"session_id"`
	// TraceID is the trace of the run that confirmed the opening.
	TraceID string `json:"trace_id,omitempty"`
}
