package collector

import (
	"strconv"
	"time"

	"github.com/dropstream/dropstream/avail"
)

// Health statuses of a source.
const (
	// StatusUp: the source's last runs are fine, or it has failed fewer
	// than DownAfter times in a row.
	StatusUp = "up"
	// StatusDown: the source has failed DownAfter or more times in a row.
	StatusDown = "down"
	// StatusAuthExpired: the provider refused the credentials; the source is
	// paused until its configuration changes, and counts as down.
	StatusAuthExpired = "auth_expired"
)

// SourceHealth is what the collector knows of a source's recent polls.
type SourceHealth struct {
	SourceID string `json:"source_id"`
	// Status is StatusUp, StatusDown or StatusAuthExpired.
	Status string `json:"status"`
	// ConsecutiveFailures counts failed runs since the last successful one.
	ConsecutiveFailures int       `json:"consecutive_failures"`
	LastSuccess         time.Time `json:"last_success,omitzero"`
	LastFailure         time.Time `json:"last_failure,omitzero"`
	// LastError is the error of the last failed run.
	LastError string `json:"last_error,omitempty"`
	// LastRunID is the id of the last run, failed or not.
	LastRunID string `json:"last_run_id,omitempty"`
	// Down reports a source that went down and has not come up since (it
	// may also be paused for expired credentials).
	Down bool `json:"down"`
	// Paused reports a source not polled because its credentials expired.
	Paused bool `json:"paused"`
}

func (h *SourceHealth) status() string {
	switch {
	case h.Paused:
		return StatusAuthExpired
	case h.Down:
		return StatusDown
	}
	return StatusUp
}

// record folds one run's outcome into the health and returns the source
// transition it causes: avail.KindClose (down), avail.KindOpen (up) or "".
func (h *SourceHealth) record(ok bool, runID string, at time.Time, errText string, authExpired bool, downAfter int) string {
	h.LastRunID = runID
	kind := ""
	if ok {
		h.ConsecutiveFailures = 0
		h.LastSuccess = at
		if h.Down {
			h.Down = false
			kind = avail.KindOpen
		}
	} else {
		h.ConsecutiveFailures++
		h.LastFailure = at
		h.LastError = errText
		if authExpired {
			h.Paused = true
		}
		// A refused credential pauses the source: it is blind from now on,
		// whatever DownAfter says, so its watchers are told at once.
		if !h.Down && (h.ConsecutiveFailures >= downAfter || authExpired) {
			h.Down = true
			kind = avail.KindClose
		}
	}
	h.Status = h.status()
	return kind
}

// sourceTransition builds the transition of a source going down (close) or
// up (open), seen by run runID at runAt.
func sourceTransition(src Source, h SourceHealth, kind, runID string, runAt time.Time, traceID string) avail.Transition {
	key := avail.SourceKey(src.ID)
	attrs := map[string]string{"status": h.Status, "consecutive_failures": strconv.Itoa(h.ConsecutiveFailures)}
	if kind == avail.KindClose && h.LastError != "" {
		attrs["error"] = h.LastError
	}
	return avail.Transition{
		EventID:  avail.EventID(runID, key, kind, true),
		Entity:   avail.Entity{Key: key, Kind: avail.EntitySource, Provider: src.Provider, Venue: src.ID, Attrs: attrs},
		ScopeKey: key,
		SourceID: src.ID,
		Kind:     kind,
		Stable:   true,
		Notify:   true,
		RunID:    runID,
		RunAt:    runAt,
		LastSeen: h.LastSuccess,
		TraceID:  traceID,
	}
}
