// Package rediskey builds the names of dropstream's Redis keys in one
// place. Every key is Prefix, a hash tag, then parts separated by Sep:
// "ds:{avail.3}:raw", "ds:{notifier}:throttle:blocked". Keys with the same
// hash tag live in one Redis Cluster slot, so a Lua script or a MULTI may
// touch them together. Key names are stored data: changing how a key is
// built moves existing data out of sight.
package rediskey

import (
	"strconv"
	"strings"
)

// Prefix starts every dropstream key.
const Prefix = "ds:"

// Sep separates the tag and the parts of a key.
const Sep = ":"

// Tag returns the hash tag "{name}". Every key built with it shares one
// Redis Cluster slot.
func Tag(name string) string { return "{" + name + "}" }

// PartitionTag returns the hash tag of partition p of a flow, "{flow.p}":
// the tag of every stream, projection and ledger key of that partition.
func PartitionTag(flow string, p int) string {
	return "{" + flow + "." + strconv.Itoa(p) + "}"
}

// Key returns Prefix+tag+Sep+part..., byte for byte:
// Key("{avail.3}", "diff", "scope", k) is "ds:{avail.3}:diff:scope:"+k. An
// empty last part leaves a trailing Sep, a prefix to append an id to.
func Key(tag string, parts ...string) string {
	n := len(Prefix) + len(tag)
	for _, p := range parts {
		n += len(Sep) + len(p)
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(Prefix)
	b.WriteString(tag)
	for _, p := range parts {
		b.WriteString(Sep)
		b.WriteString(p)
	}
	return b.String()
}

// Partition returns the key of partition p of a flow:
// Key(PartitionTag(flow, p), parts...).
func Partition(flow string, p int, parts ...string) string {
	return Key(PartitionTag(flow, p), parts...)
}
