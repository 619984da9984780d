package watch

import (
	"time"

	"github.com/dropstream/dropstream/avail"
)

// The events of watcher notifications (OpenEvent.Event).
const (
	// EventAvailabilityOpen: a stable opening (once per open window, or
	// per Watcher.RearmAfterMinutes).
	EventAvailabilityOpen = "availability.open"
	// EventAvailabilityProvisional: an opening on first sight, before it is
	// confirmed (Watcher.Provisional).
	EventAvailabilityProvisional = "availability.provisional"
	// EventAvailabilityRetracted: a provisional opening closed before it
	// was confirmed; RetractsEventID names the provisional notice.
	EventAvailabilityRetracted = "availability.retracted"
	// EventAvailabilityGone: a told opening closed for good
	// (Watcher.NotifyGone).
	EventAvailabilityGone = "availability.gone"
	// EventSourceDown and EventSourceUp: a source serving the watcher went
	// down or came back; Source tells which and for how long.
	EventSourceDown = "availability.source_down"
	EventSourceUp   = "availability.source_up"
)

// SourceStatus is the source part of a source health notice.
type SourceStatus struct {
	SourceID string `json:"source_id"`
	// Status is "down" or "up".
	Status              string `json:"status"`
	ConsecutiveFailures int    `json:"consecutive_failures,omitempty"`
	// BlindSince is when the source last answered before it went down.
	BlindSince time.Time `json:"blind_since,omitzero"`
	// BlindForSeconds, on "up", is how long it was blind: from
	// BlindSince to the run that brought it back.
	BlindForSeconds int64 `json:"blind_for_seconds,omitempty"`
}

// OpenEvent is the JSON body of every watcher notification. Receivers
// verify the Standard Webhooks headers and dedupe on webhook-id.
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
	// SessionID is the open window's avail.SessionID; empty when the raw open
	// that began it was not seen.
	SessionID string `json:"session_id"`
	// TraceID is the trace of the run that confirmed the opening.
	TraceID string `json:"trace_id,omitempty"`
	// BlindForSeconds is how long the source was blind before this opening
	// was first seen: it may have begun any time then.
	BlindForSeconds int64 `json:"blind_for_seconds,omitempty"`
	// RetractsEventID, on EventAvailabilityRetracted, is the event id of
	// the provisional notice it retracts.
	RetractsEventID string `json:"retracts_event_id,omitempty"`
	// Source is set on EventSourceDown and EventSourceUp.
	Source *SourceStatus `json:"source,omitempty"`
	// Text is a short human summary ("source was blind for 12 min").
	Text string `json:"text,omitempty"`
}
