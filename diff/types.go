package diff

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/avail/availjson"
	"github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/internal/rediskey"
)

// DefaultStabilization is the k used when Snapshot.Stabilization is 0.
const DefaultStabilization = 2

// MaxStabilization is the largest accepted Snapshot.Stabilization.
const MaxStabilization = 10

// StateTTL is how long a scope's diff state (open set, scope hash, pending
// hash) is kept after its last applied run.
const StateTTL = 35 * 24 * time.Hour

// MaxErrorLen bounds the run error copied into a run record; longer errors
// are cut at a UTF-8 boundary.
const MaxErrorLen = 1024

// Result is the outcome of applying one snapshot.
type Result struct {
	// Applied is false for a replay, a late run or a held run: nothing
	// changed.
	Applied bool
	// Held reports a run the guard held (see Guard): it would have closed
	// too much of its scope at once, and changed nothing.
	Held bool
	// Opened and Closed count raw flips (transitions with Raw true).
	Opened, Closed int
	// StableOpened and StableClosed count stable transitions, including
	// the combined raw+stable ones of stabilization 1.
	StableOpened, StableClosed int
	// Notices counts the notifying stable opens; ReleasedAfterMS is the
	// earliest run_at (Unix ms) of the OK runs before their raw opens.
	Notices         int
	ReleasedAfterMS int64
	// VenueK[i] counts the venues given k = i+1 under per-venue
	// stabilization; all zero when it is off.
	VenueK [MaxStabilization]int
}

// Guard holds a run closing more than Min entities and Share of the open
// ones until the next OK run confirms it.
type Guard struct {
	// Min is the most closes a run may make without the guard looking at
	// it; 0 turns the guard off.
	Min int
	// Share is the share of the scope's open entities (0..1) a run may
	// close at once.
	Share float64
}

// permille is Share in thousandths, as the script takes it.
func (g Guard) permille() int { return int(g.Share*1000 + 0.5) }

// Validate reports a guard with a negative Min or a Share outside 0..1.
func (g Guard) Validate() error {
	if g.Min < 0 || g.Share < 0 || g.Share > 1 || g.Share != g.Share {
		return fmt.Errorf("diff: guard %+v: want min ≥ 0 and share in 0..1", g)
	}
	return nil
}

// stabilization returns the effective k of a snapshot.
func stabilization(snap avail.Snapshot) int { return cmp.Or(snap.Stabilization, DefaultStabilization) }

// observed returns the snapshot's entities without duplicate keys (the
// first wins), or nil for a failed run.
func observed(snap avail.Snapshot) []avail.Entity {
	if !snap.OK {
		return nil
	}
	if !duplicateKeys(snap.Entities) {
		return snap.Entities
	}
	seen := make(map[string]struct{}, len(snap.Entities))
	out := make([]avail.Entity, 0, len(snap.Entities))
	for _, e := range snap.Entities {
		if _, dup := seen[e.Key]; dup {
			continue
		}
		seen[e.Key] = struct{}{}
		out = append(out, e)
	}
	return out
}

// duplicateKeys reports whether two entities have the same key. Sources
// mostly list entities in key order, which proves there are none.
func duplicateKeys(es []avail.Entity) bool {
	ascending := true
	for i := 1; i < len(es) && ascending; i++ {
		ascending = es[i-1].Key < es[i].Key
	}
	if ascending {
		return false
	}
	seen := make(map[string]struct{}, len(es))
	for _, e := range es {
		if _, dup := seen[e.Key]; dup {
			return true
		}
		seen[e.Key] = struct{}{}
	}
	return false
}

// runError returns the snapshot's error as recorded: valid UTF-8, at most
// MaxErrorLen bytes.
func runError(snap avail.Snapshot) string {
	s := snap.Error
	if len(s) > MaxErrorLen {
		s = s[:MaxErrorLen]
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// Keys names the Redis keys the diff script of one scope touches. They all
// carry the hash tag of the scope's partition, topics.Snapshots.HashTag(p).
type Keys struct {
	// Partition is topics.Snapshots.Partition(scope key).
	Partition int
	// Open is the HASH of the scope's raw open entity keys, each with the
	// run that opened it ("" if unknown).
	Open string
	// LegacyOpen is the SET of raw open keys of earlier versions; the script
	// adopts it into Open and deletes it.
	LegacyOpen string
	// Scope is the HASH of the scope's last applied run.
	Scope string
	// Pending is the HASH of the scope's entities awaiting stabilization.
	Pending string
	// Flaps is the HASH of the scope's venues' flap records, "<opens>:<flaps>"
	// (see VenueFlaps), kept under per-venue stabilization.
	Flaps string
	// Transitions and Runs are the partition's output streams.
	Transitions, Runs string
}

// KeysOf returns the keys of a scope. The topics must have one partition
// count (avail.NewTopics guarantees it), so that every key shares a slot.
func KeysOf(topics avail.Topics, scopeKey string) (Keys, error) {
	n := topics.Snapshots.Partitions
	if topics.Transitions.Partitions != n || topics.Runs.Partitions != n ||
		topics.Transitions.Flow != topics.Snapshots.Flow || topics.Runs.Flow != topics.Snapshots.Flow {
		return Keys{}, fmt.Errorf("diff: snapshots, transitions and runs topics must share flow and partition count (%s/%d, %s/%d, %s/%d)",
			topics.Snapshots, n, topics.Transitions, topics.Transitions.Partitions, topics.Runs, topics.Runs.Partitions)
	}
	if err := topics.Snapshots.Validate(); err != nil {
		return Keys{}, fmt.Errorf("diff: %w", err)
	}
	p := topics.Snapshots.Partition(scopeKey)
	prefix := rediskey.Key(topics.Snapshots.HashTag(p), "diff", "")
	return Keys{
		Partition:   p,
		Open:        prefix + "opened:" + scopeKey,
		LegacyOpen:  prefix + "open:" + scopeKey,
		Scope:       prefix + "scope:" + scopeKey,
		Pending:     prefix + "pend:" + scopeKey,
		Flaps:       prefix + "flaps:" + scopeKey,
		Transitions: topics.Transitions.Stream(p),
		Runs:        topics.Runs.Stream(p),
	}, nil
}

// validPerVenueMaxK reports a per-venue maximum k outside 0..MaxStabilization.
func validPerVenueMaxK(maxK int) error {
	if maxK < 0 || maxK > MaxStabilization {
		return fmt.Errorf("diff: per-venue max k %d: want 0 (off) to %d", maxK, MaxStabilization)
	}
	return nil
}

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
