package diff

import (
	"strings"
	"time"

	"github.com/dropstream/dropstream/avail"
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

// Transition is what the diff stage appends to the transitions stream. A
// raw-only flip has Raw true and Stable false; a stable confirmation of an
// earlier raw flip has Raw false and Stable true; with stabilization 1 a
// flip is one event with both true.
type Transition = avail.Transition

// Result is the outcome of applying one snapshot.
type Result struct {
	// Applied is false for a replay or a late run: nothing changed.
	Applied bool
	// Opened and Closed count raw flips (transitions with Raw true).
	Opened, Closed int
	// StableOpened and StableClosed count stable transitions, including
	// the combined raw+stable ones of stabilization 1.
	StableOpened, StableClosed int
}

// Pending is an entity whose raw state differs from its stable state and
// is waiting for confirmation.
type Pending struct {
	// Kind is avail.KindOpen or avail.KindClose: the raw state awaiting
	// confirmation.
	Kind string
	// Count is the number of consecutive applied OK runs that observed it,
	// the flip's own run included.
	Count int
	// Baseline is set for opens of the scope's first applied OK run.
	Baseline bool
	// LastSeen is, for a close, the run_at of the last run that observed
	// the entity open; zero for opens.
	LastSeen time.Time
}

// State is the diff state of one scope.
type State struct {
	// Open holds the raw open entity keys, sorted.
	Open []string
	// Pending holds the entities awaiting stabilization, by key.
	Pending map[string]Pending
	// LastRunID and LastRunAt (millisecond precision) name the last applied
	// run; LastRunID is empty before the first one.
	LastRunID string
	LastRunAt time.Time
	// LastOKRunAt is the run_at of the last applied OK run; zero before the
	// first one (the next OK run is then the baseline).
	LastOKRunAt time.Time
}

// stabilization returns the effective k of a snapshot.
func stabilization(snap avail.Snapshot) int {
	if snap.Stabilization == 0 {
		return DefaultStabilization
	}
	return snap.Stabilization
}

// observed returns the snapshot's entities with duplicate keys removed (the
// first occurrence wins), or nil for a failed run, whose entities say
// nothing.
func observed(snap avail.Snapshot) []avail.Entity {
	if !snap.OK {
		return nil
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

// runError returns the snapshot's error as recorded: valid UTF-8, at most
// MaxErrorLen bytes.
func runError(snap avail.Snapshot) string {
	s := snap.Error
	if len(s) > MaxErrorLen {
		s = s[:MaxErrorLen]
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// runIsNewer reports whether (at, id) orders after (lastAt, lastID): run_at
// first, then run_id byte-wise.
func runIsNewer(at int64, id string, lastAt int64, lastID string) bool {
	if at != lastAt {
		return at > lastAt
	}
	return id > lastID
}
