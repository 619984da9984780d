package avail

import (
	"cmp"
	"crypto/sha1" // an id, not a secret: matches redis.sha1hex in the diff script
	"encoding/hex"
	"time"
)

// RawRun is one poll of one (source, scope): what the collector fetched,
// or why it failed. A failed fetch is a failed run, never an empty snapshot.
type RawRun struct {
	RunID      string    `json:"run_id"`
	SourceID   string    `json:"source_id"`
	Provider   string    `json:"provider"`
	Scope      Scope     `json:"scope"`
	ScopeKey   string    `json:"scope_key"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	Status     string    `json:"status"`
	Error      string    `json:"error,omitempty"`
	HTTPStatus int       `json:"http_status,omitempty"`
	// Body is the provider's response body (at most MaxRawBodySize).
	Body []byte `json:"body,omitempty"`
	// Options copied from the source, so later stages need no lookup.
	Stabilization    int  `json:"stabilization"`
	NotifyFirstSight bool `json:"notify_first_sight,omitempty"`
	RestaurantLevel  bool `json:"restaurant_level,omitempty"`
}

// Snapshot is the normalized set of entities a run observed in a scope.
// When OK is false the run failed and Entities says nothing.
type Snapshot struct {
	RunID            string    `json:"run_id"`
	SourceID         string    `json:"source_id"`
	Provider         string    `json:"provider"`
	ScopeKey         string    `json:"scope_key"`
	RunAt            time.Time `json:"run_at"`
	StartedAt        time.Time `json:"started_at"`
	OK               bool      `json:"ok"`
	Error            string    `json:"error,omitempty"`
	Entities         []Entity  `json:"entities,omitempty"`
	Stabilization    int       `json:"stabilization"`
	NotifyFirstSight bool      `json:"notify_first_sight,omitempty"`
}

// Transition is a flip of one entity seen by one run, emitted again with
// Stable once confirmed. Baseline flips notify only on first sight.
type Transition struct {
	EventID  string `json:"event_id"`
	Entity   Entity `json:"entity"`
	ScopeKey string `json:"scope_key"`
	SourceID string `json:"source_id"`
	Kind     string `json:"kind"`
	// Raw is set on the run where the raw state flipped; the projection
	// and sessions follow raw flips.
	Raw bool `json:"raw,omitempty"`
	// Stable is set once the flip held for Stabilization runs; notifications
	// follow stable transitions.
	Stable   bool      `json:"stable"`
	Baseline bool      `json:"baseline,omitempty"`
	Notify   bool      `json:"notify"`
	RunID    string    `json:"run_id"`
	RunAt    time.Time `json:"run_at"`
	LastSeen time.Time `json:"last_seen,omitempty"`
	TraceID  string    `json:"trace_id,omitempty"`
	// OpenRunID and OpenedAtMS, on a raw close, name the run that opened the
	// session it ends and its run_at in Unix ms.
	OpenRunID  string `json:"open_run_id,omitempty"`
	OpenedAtMS int64  `json:"opened_at_ms,omitempty"`
}

// RunTransitions is a run's record and up to MaxTransitionsPerMessage of
// its transitions, whose run fields Expand fills in.
type RunTransitions struct {
	Run         RunRecord    `json:"run"`
	Transitions []Transition `json:"transitions"`
}

// Expand returns r's transitions with the run's fields set where they are
// empty (it sets them in r.Transitions).
func (r RunTransitions) Expand() []Transition {
	for i := range r.Transitions {
		t := &r.Transitions[i]
		t.RunID = cmp.Or(t.RunID, r.Run.RunID)
		if t.RunAt.IsZero() {
			t.RunAt = r.Run.RunAt
		}
		t.ScopeKey = cmp.Or(t.ScopeKey, r.Run.ScopeKey)
		t.SourceID = cmp.Or(t.SourceID, r.Run.SourceID)
		t.TraceID = cmp.Or(t.TraceID, r.Run.TraceID)
	}
	return r.Transitions
}

// RunRecord is the outcome of a run, for the runs table.
type RunRecord struct {
	RunID     string    `json:"run_id"`
	SourceID  string    `json:"source_id"`
	Provider  string    `json:"provider"`
	ScopeKey  string    `json:"scope_key"`
	StartedAt time.Time `json:"started_at"`
	RunAt     time.Time `json:"run_at"`
	Status    string    `json:"status"`
	Error     string    `json:"error,omitempty"`
	Observed  int       `json:"observed"`
	Opened    int       `json:"opened"`
	Closed    int       `json:"closed"`
	// Applied is false for a replayed run or one older than the last
	// applied run of its scope: it changed nothing.
	Applied bool   `json:"applied"`
	TraceID string `json:"trace_id,omitempty"`
}

// EventID is SHA-1 (hex) of "run_id\nentity_key\nkind\nstable|raw", as
// the diff script computes it, so a reprocessed run appends nothing new.
func EventID(runID, entityKey, kind string, stable bool) string {
	phase := "raw"
	if stable {
		phase = "stable"
	}
	sum := sha1.Sum([]byte(runID + "\n" + entityKey + "\n" + kind + "\n" + phase))
	return hex.EncodeToString(sum[:])
}

// SessionID is the deterministic id of the availability session an entity
// opened in a run: SHA-1 (hex) of "entity_key\nopen_run_id\nsession".
func SessionID(entityKey, openRunID string) string {
	sum := sha1.Sum([]byte(entityKey + "\n" + openRunID + "\nsession"))
	return hex.EncodeToString(sum[:])
}
