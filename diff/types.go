package diff

import (
	"fmt"
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
	// Notices counts the stable opens that notify and whose release time
	// is bounded: each opened after the scope's OK run before its raw
	// open. ReleasedAfterMS is the earliest of those runs' run_at in Unix
	// ms (0 with no notices): a release → notice latency is at most the
	// time from it to the notice.
	Notices         int
	ReleasedAfterMS int64
	// VenueK counts, under per-venue stabilization, the venues of the
	// run's raw flips and pending entities by the k the run chose for
	// them: VenueK[i] venues had k = i+1. All zero when it is off, and for
	// runs not applied or failed.
	VenueK [MaxStabilization]int
}

// Guard holds a run that would close too much of its scope at once — a
// provider answering a blank or blocked page as if nothing were open —
// until the next run confirms it: a run closing more than Min entities and
// more than Share of the scope's open entities produces no transition and
// changes nothing but the scope's last run, and its run record has status
// "held". If the next OK run would close as much, it applies; if not, the
// held closes never happen.
type Guard struct {
	// Min is the most closes a run may make without the guard looking at
	// it; 0 turns the guard off.
	Min int
	// Share is the share of the scope's open entities (0..1) a run may
	// close at once.
	Share float64
}

// DefaultGuard holds a run closing more than 10 entities and more than half
// of its scope's open ones: the availability flow's default
// (DROPSTREAM_AVAIL_GUARD_MIN, DROPSTREAM_AVAIL_GUARD_SHARE). The diff
// package's functions apply no guard unless given one.
var DefaultGuard = Guard{Min: 10, Share: 0.5}

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
func stabilization(snap avail.Snapshot) int {
	if snap.Stabilization == 0 {
		return DefaultStabilization
	}
	return snap.Stabilization
}

// observed returns the snapshot's entities with duplicate keys removed (the
// first occurrence wins), or nil for a failed run, whose entities say
// nothing. Without duplicates it returns snap.Entities itself.
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
