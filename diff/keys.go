package diff

import (
	"fmt"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/internal/rediskey"
)

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
