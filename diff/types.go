package diff

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/dropstream/dropstream/avail"
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

// Transition is what the diff stage appends to the transitions stream: a
// raw flip (Raw), a stable confirmation (Stable), or both at k = 1.
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

// DefaultGuard is the availability flow's guard: more than 10 closes and
// more than half of the open entities.
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

// list returns the keys in the script's KEYS order.
func (k Keys) list() []string {
	return []string{k.Open, k.Scope, k.Pending, k.Transitions, k.Runs, k.LegacyOpen, k.Flaps}
}

// Per-venue stabilization (Input.PerVenueMaxK): each venue's k comes from
// its flap rate. A flap is a raw close of an opening still pending or made
// by the previous OK run. Opens and flaps are halved whenever the opens
// exceed FlapWindow, so old behaviour fades. k is the snapshot's below
// MinFlapOpens opens, 1 when at most 5% flapped, else
// min(maxK, 2 + ⌊flaps·(maxK−1)/opens⌋).
const (
	// FlapWindow bounds a venue's raw-open count: past it both counts halve.
	FlapWindow = 32
	// MinFlapOpens is the raw opens a venue needs before its flap rate
	// chooses its k.
	MinFlapOpens = 4
)

// validPerVenueMaxK reports a per-venue maximum k outside 0..MaxStabilization.
func validPerVenueMaxK(maxK int) error {
	if maxK < 0 || maxK > MaxStabilization {
		return fmt.Errorf("diff: per-venue max k %d: want 0 (off) to %d", maxK, MaxStabilization)
	}
	return nil
}
