// Package avail holds the message types and topics the availability
// stages exchange as JSON; stages never import each other.
package avail

import (
	"cmp"
	"crypto/sha1" // an id, not a secret: matches redis.sha1hex in the diff script
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dropstream/dropstream/stream"
)

// Flow is the flow name of every availability topic; its partitions share
// the hash tag "{avail.p}" with the diff state, projections and ledgers.
const Flow = "avail"

// Message types, the Type of each stream message.
const (
	TypeRawRun     = "avail.raw_run"
	TypeSnapshot   = "avail.snapshot"
	TypeTransition = "avail.transition"
	// TypeTransitions is a RunTransitions, written by the diff. Consumers of
	// the transition topic take both types.
	TypeTransitions = "avail.transitions"
	TypeRun         = "avail.run"
)

// Topics are the availability streams.
type Topics struct {
	// Raw carries provider responses (RawRun), keyed by scope key.
	Raw stream.Topic
	// Snapshots carries normalized observations (Snapshot), keyed by scope key.
	Snapshots stream.Topic
	// Transitions carries the diff's RunTransitions and the collector's
	// source transitions, keyed by scope key.
	Transitions stream.Topic
	// Runs carries the outcome (RunRecord) of every run that flipped
	// nothing (the others come with their transitions), keyed by scope key.
	Runs stream.Topic
}

// NewTopics returns the topics with the given partition count.
func NewTopics(partitions int) Topics {
	return Topics{
		Raw:         stream.NewTopic(Flow, "raw", partitions),
		Snapshots:   stream.NewTopic(Flow, "snapshots", partitions),
		Transitions: stream.NewTopic(Flow, "transitions", partitions),
		Runs:        stream.NewTopic(Flow, "runs", partitions),
	}
}

// Run statuses.
const (
	StatusOK     = "ok"
	StatusFailed = "failed"
)

// Transition kinds.
const (
	KindOpen  = "open"
	KindClose = "close"
)

// Entity kinds.
const (
	EntitySlot       = "slot"
	EntityRestaurant = "restaurant"
	EntitySource     = "source"
)

// Limits on outside input.
const (
	MaxIDLen    = 64
	MaxFieldLen = 128
	MaxEntities = 100000 // per snapshot
	// MaxTransitionsPerMessage bounds a TypeTransitions message.
	MaxTransitionsPerMessage = 64
	MaxScopes                = 1000 // per source
	MaxRawBodySize           = 8 << 20
)

// Entity is one observed thing: a slot (provider + venue + date + time +
// party size) or, with restaurant-level keys, a venue on a date for a party.
type Entity struct {
	Key       string            `json:"key"`
	Kind      string            `json:"kind"`
	Provider  string            `json:"provider"`
	Venue     string            `json:"venue"`
	VenueName string            `json:"venue_name,omitempty"`
	Date      string            `json:"date,omitempty"`
	Time      string            `json:"time,omitempty"`
	PartySize int               `json:"party_size,omitempty"`
	Attrs     map[string]string `json:"attrs,omitempty"`
}

// keySep separates the parts of an entity key; parts never contain it.
const keySep = "|"

// SlotKey is the canonical key of a slot.
func SlotKey(provider, venue, date, hhmm string, party int) string {
	return strings.Join([]string{provider, venue, date, hhmm, strconv.Itoa(party)}, keySep)
}

// RestaurantKey is the canonical key of a venue on a date for a party size.
func RestaurantKey(provider, venue, date string, party int) string {
	return strings.Join([]string{provider, venue, date, "*", strconv.Itoa(party)}, keySep)
}

// SourceKey is the key of a source's health entity.
func SourceKey(sourceID string) string { return "source" + keySep + sourceID }

// ParseKey rebuilds an entity's identity from its key.
func ParseKey(key string) (Entity, error) {
	var parts [5]string // not strings.Split: List parses every key it scans
	n, rest, more := 0, key, true
	for ; more && n < len(parts); n++ {
		parts[n], rest, more = strings.Cut(rest, keySep)
	}
	if n == 2 && !more && parts[0] == "source" {
		return Entity{Key: key, Kind: EntitySource, Venue: parts[1]}, nil
	}
	if n != 5 || more {
		return Entity{}, fmt.Errorf("entity key %q: want provider|venue|date|time|party", key)
	}
	party, err := strconv.Atoi(parts[4])
	if err != nil {
		return Entity{}, fmt.Errorf("entity key %q: party size: %w", key, err)
	}
	e := Entity{Key: key, Kind: EntitySlot, Provider: parts[0], Venue: parts[1], Date: parts[2], Time: parts[3], PartySize: party}
	if e.Time == "*" {
		e.Kind, e.Time = EntityRestaurant, ""
	}
	return e, nil
}

// CleanPart checks one part of a key from outside input.
func CleanPart(name, v string) error {
	switch {
	case v == "":
		return fmt.Errorf("%s is empty", name)
	case len(v) > MaxFieldLen:
		return fmt.Errorf("%s is longer than %d bytes", name, MaxFieldLen)
	case strings.ContainsAny(v, keySep+"{}\n\r"):
		return fmt.Errorf("%s %q contains one of | { } or a newline", name, v)
	}
	return nil
}

// Scope is what one poll asks a provider for.
type Scope struct {
	Venue     string `json:"venue,omitempty"`
	Date      string `json:"date"`
	PartySize int    `json:"party_size"`
	Query     string `json:"query,omitempty"`
}

// Key is the scope's canonical key within a source.
func (s Scope) Key(sourceID string) string {
	return strings.Join([]string{sourceID, s.Venue, s.Date, strconv.Itoa(s.PartySize), s.Query}, keySep)
}

// Validate checks a scope from outside input.
func (s Scope) Validate() error {
	var errs []error
	if _, err := time.Parse("2006-01-02", s.Date); err != nil {
		errs = append(errs, fmt.Errorf("date %q: want YYYY-MM-DD", s.Date))
	}
	if s.PartySize < 1 || s.PartySize > 50 {
		errs = append(errs, fmt.Errorf("party_size %d out of range 1..50", s.PartySize))
	}
	if s.Venue != "" {
		errs = append(errs, CleanPart("venue", s.Venue))
	}
	if len(s.Query) > MaxFieldLen || strings.ContainsAny(s.Query, keySep) {
		errs = append(errs, fmt.Errorf("query longer than %d bytes or contains |", MaxFieldLen))
	}
	return errors.Join(errs...)
}

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
