package diff

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/avail/availjson"
	"github.com/dropstream/dropstream/internal/clip"
)

// ErrInvalidSnapshot is wrapped by every error about a snapshot that no
// retry can fix: the stage dead-letters such messages.
var ErrInvalidSnapshot = errors.New("invalid snapshot")

// MaxScopeKeyLen bounds a snapshot's scope key, in bytes.
const MaxScopeKeyLen = 1024

// maxPartySize bounds the party size of an entity key, as avail.Scope does.
const maxPartySize = 50

// maxListedEntityErrors caps the invalid entities named in one error.
const maxListedEntityErrors = 3

// DecodeSnapshot decodes and validates a snapshot whose ScopeKey must equal
// msgKey. Errors wrap ErrInvalidSnapshot.
func DecodeSnapshot(msgKey string, payload []byte) (avail.Snapshot, error) {
	var snap avail.Snapshot
	if err := availjson.UnmarshalSnapshot(payload, &snap); err != nil {
		return avail.Snapshot{}, fmt.Errorf("%w: decode: %w", ErrInvalidSnapshot, err)
	}
	if snap.ScopeKey != msgKey {
		return avail.Snapshot{}, fmt.Errorf("%w: scope_key %.100q differs from message key %.100q",
			ErrInvalidSnapshot, snap.ScopeKey, msgKey)
	}
	if err := Validate(snap); err != nil {
		return avail.Snapshot{}, err
	}
	return snap, nil
}

// Validate reports why a snapshot cannot be applied, or nil: ids, keys and
// times within the avail limits, Stabilization in 0..MaxStabilization, at
// most avail.MaxEntities entities, each key valid (ValidateEntityKey).
// The first of duplicate keys counts. The error wraps ErrInvalidSnapshot.
func Validate(snap avail.Snapshot) error {
	var errs []error
	switch {
	case snap.RunID == "":
		errs = append(errs, errors.New("run_id is empty"))
	case len(snap.RunID) > avail.MaxIDLen || !utf8.ValidString(snap.RunID) || clip.HasControl(snap.RunID):
		errs = append(errs, fmt.Errorf("run_id %.100q: want at most %d bytes of UTF-8 without control characters",
			snap.RunID, avail.MaxIDLen))
	}
	switch {
	case snap.ScopeKey == "":
		errs = append(errs, errors.New("scope_key is empty"))
	case len(snap.ScopeKey) > MaxScopeKeyLen || !utf8.ValidString(snap.ScopeKey):
		errs = append(errs, fmt.Errorf("scope_key: want at most %d bytes of UTF-8", MaxScopeKeyLen))
	}
	if len(snap.SourceID) > avail.MaxIDLen || !utf8.ValidString(snap.SourceID) {
		errs = append(errs, fmt.Errorf("source_id: want at most %d bytes of UTF-8", avail.MaxIDLen))
	}
	if len(snap.Provider) > avail.MaxFieldLen || !utf8.ValidString(snap.Provider) {
		errs = append(errs, fmt.Errorf("provider: want at most %d bytes of UTF-8", avail.MaxFieldLen))
	}
	if snap.RunAt.IsZero() || snap.RunAt.Year() < 1 || !encodableTime(snap.RunAt) {
		errs = append(errs, fmt.Errorf("run_at %s: want a time in the years 1..9999", snap.RunAt))
	}
	if !encodableTime(snap.StartedAt) {
		errs = append(errs, fmt.Errorf("started_at %s: want a time in the years 0..9999", snap.StartedAt))
	}
	if snap.Stabilization < 0 || snap.Stabilization > MaxStabilization {
		errs = append(errs, fmt.Errorf("stabilization %d out of range 1..%d (0 means %d)",
			snap.Stabilization, MaxStabilization, DefaultStabilization))
	}
	if n := len(snap.Entities); n > avail.MaxEntities {
		errs = append(errs, fmt.Errorf("%d entities, more than %d", n, avail.MaxEntities))
	} else if err := validateEntities(snap.Entities); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: run %.100q: %w", ErrInvalidSnapshot, snap.RunID, errors.Join(errs...))
}

// validateEntities names the first few invalid entity keys and counts them.
func validateEntities(entities []avail.Entity) error {
	var errs []error
	bad := 0
	for i, e := range entities {
		if err := ValidateEntityKey(e.Key); err != nil {
			bad++
			if len(errs) < maxListedEntityErrors {
				errs = append(errs, fmt.Errorf("entities[%d]: %w", i, err))
			}
		}
	}
	if bad > len(errs) {
		errs = append(errs, fmt.Errorf("%d invalid entity keys in all", bad))
	}
	return errors.Join(errs...)
}

// ValidateEntityKey reports whether key is a canonical entity key that
// avail.ParseKey accepts, with clean parts and a party size in 1..50.
func ValidateEntityKey(key string) error {
	if plainEntityKey(key) {
		return nil
	}
	return checkEntityKey(key)
}

// checkEntityKey is ValidateEntityKey without the fast path.
func checkEntityKey(key string) error {
	if !utf8.ValidString(key) {
		return fmt.Errorf("entity key %.100q is not valid UTF-8", key)
	}
	e, err := avail.ParseKey(key)
	if err != nil {
		return err
	}
	if e.Kind == avail.EntitySource {
		return avail.CleanPart("source id", e.Venue)
	}
	parts := strings.Split(key, "|")
	errs := []error{
		avail.CleanPart("provider", e.Provider),
		avail.CleanPart("venue", e.Venue),
		avail.CleanPart("date", e.Date),
		avail.CleanPart("time", parts[3]),
	}
	if strconv.Itoa(e.PartySize) != parts[4] || e.PartySize < 1 || e.PartySize > maxPartySize {
		errs = append(errs, fmt.Errorf("party size %q: want 1..%d in canonical decimal", parts[4], maxPartySize))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("entity key %.100q: %w", key, err)
	}
	return nil
}

// plainEntityKey reports without allocating that key is valid; false means
// ValidateEntityKey must look closer.
func plainEntityKey(key string) bool {
	if !utf8.ValidString(key) {
		return false
	}
	if id, ok := strings.CutPrefix(key, "source|"); ok && !strings.Contains(id, "|") {
		return cleanPart(id)
	}
	rest := key
	for range 4 {
		i := strings.IndexByte(rest, '|')
		if i < 0 || !cleanPart(rest[:i]) {
			return false
		}
		rest = rest[i+1:]
	}
	switch {
	case len(rest) == 1:
		return rest[0] >= '1' && rest[0] <= '9'
	case len(rest) == 2:
		n := int(rest[0]-'0')*10 + int(rest[1]-'0')
		return rest[0] >= '1' && rest[0] <= '9' && rest[1] >= '0' && rest[1] <= '9' && n <= maxPartySize
	}
	return false
}

// cleanPart is avail.CleanPart(name, v) == nil.
func cleanPart(v string) bool {
	if v == "" || len(v) > avail.MaxFieldLen {
		return false
	}
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '|', '{', '}', '\n', '\r':
			return false
		}
	}
	return true
}

// encodableTime reports whether t has a JSON encoding (years 0..9999, a
// zone offset under 24h).
func encodableTime(t time.Time) bool {
	_, err := t.MarshalJSON()
	return err == nil
}
