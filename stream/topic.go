package stream

import (
	"errors"
	"hash/fnv"

	"github.com/dropstream/dropstream/internal/bounds"
	"github.com/dropstream/dropstream/internal/rediskey"
	"github.com/dropstream/dropstream/internal/slug"
)

// MaxPartitions bounds the partitions of a topic.
const MaxPartitions = 1024

// Topic is a logical stream split into Partitions physical streams. Every
// key of partition p carries the hash tag "{flow.p}", so one partition's
// keys share a Cluster slot; the partition count is fixed for a deployment.
type Topic struct {
	// Flow names the domain (for example "avail"); it is part of the hash tag.
	Flow string
	// Name names the stream within the flow (for example "raw").
	Name string
	// Partitions is the number of physical streams, 1 to MaxPartitions.
	Partitions int
}

// NewTopic returns a Topic; call Validate before use with outside input.
func NewTopic(flow, name string, partitions int) Topic {
	return Topic{Flow: flow, Name: name, Partitions: partitions}
}

// Validate reports whether the topic can name streams.
func (t Topic) Validate() error {
	errs := bounds.Require(nil, validName(t.Flow), "topic flow %q: want 1-64 characters of [a-z0-9_-]", t.Flow)
	errs = bounds.Require(errs, validName(t.Name), "topic name %q: want 1-64 characters of [a-z0-9_-]", t.Name)
	errs = bounds.Check(errs, "topic "+t.String()+": partitions", t.Partitions, 1, MaxPartitions)
	return errors.Join(errs...)
}

// validName reports whether s is 1-64 characters of [a-z0-9_-].
func validName(s string) bool { return slug.Valid(s, 64) }

// String returns "flow.name", the topic's name in telemetry.
func (t Topic) String() string { return t.Flow + "." + t.Name }

// HashTag returns the hash tag shared by every key of partition p.
func (t Topic) HashTag(p int) string { return rediskey.PartitionTag(t.Flow, p) }

// Stream returns the Redis key of partition p.
func (t Topic) Stream(p int) string {
	return rediskey.Partition(t.Flow, p, t.Name)
}

// DeadLetterStream returns the dead-letter stream of partition p.
func (t Topic) DeadLetterStream(p int) string { return t.Stream(p) + ":dlq" }

// Partition returns the partition of a business key (FNV-1a modulo the
// partition count), so a key always lands in the same stream.
func (t Topic) Partition(key string) int {
	if t.Partitions <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % uint32(t.Partitions))
}
