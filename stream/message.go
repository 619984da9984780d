package stream

import (
	"cmp"
	"context"
	"errors"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/dropstream/dropstream/internal/bounds"
	"github.com/dropstream/dropstream/internal/rediskey"
	"github.com/dropstream/dropstream/internal/slug"
)

// Reserved entry field names. Every other field of a stream entry is metadata.
const (
	fieldKey     = "key"
	fieldType    = "type"
	fieldPayload = "payload"
)

// Well-known metadata names.
const (
	// MetaTraceParent is the W3C trace context of the message's producer.
	MetaTraceParent = "traceparent"
	// MetaTraceState is the W3C trace state that goes with MetaTraceParent.
	MetaTraceState = "tracestate"
)

// Message is one entry of a stream. Key selects the partition; Type names
// the payload's schema; Metadata holds the other fields. The runtime sets
// ID, Stream, Partition and Attempt.
type Message struct {
	ID        string
	Stream    string
	Partition int
	Key       string
	Type      string
	Payload   []byte
	// TraceParent and TraceState are the producer's W3C trace context (the
	// fields MetaTraceParent and MetaTraceState), kept out of Metadata.
	TraceParent string
	TraceState  string
	Metadata    map[string]string
	// Attempt is the delivery number of this message, starting at 1.
	Attempt int

	ctx     context.Context
	deleted bool        // the entry was removed from the stream while pending
	full    bool        // the read that delivered it returned all it asked for
	reuse   *traceReuse // the partition's last extracted trace context, set by the runner
}

// NewMessage returns a message with the given key, type and payload.
func NewMessage(key, typ string, payload []byte) *Message {
	return &Message{Key: key, Type: typ, Payload: payload}
}

// Context returns the context the message was delivered with (carrying its
// processing span), or context.Background when none was set.
func (m *Message) Context() context.Context { return cmp.Or(m.ctx, context.Background()) }

// SetContext sets the context whose trace a published message continues:
// a handler deriving a message from another sets it to the input's context.
func (m *Message) SetContext(ctx context.Context) { m.ctx = ctx }

// MoreWaiting reports whether the message came in a read of new entries
// that returned all it asked for, so more likely wait behind it (a batch
// stage may write at once). Redelivered messages report false.
func (m *Message) MoreWaiting() bool { return m.full }

// PublishedAt is the time the entry was added to its stream, read from its
// ID; zero when the message has no ID yet.
func (m *Message) PublishedAt() time.Time {
	ms, ok := idMillis(m.ID)
	if !ok {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// values encodes the message as XADD field/value pairs.
func (m *Message) values() []any {
	v := make([]any, 0, 10+2*len(m.Metadata))
	v = append(v, fieldKey, m.Key, fieldType, m.Type, fieldPayload, m.Payload)
	v = m.appendTrace(v)
	for k, val := range m.Metadata {
		if !reservedField(k) {
			v = append(v, k, val)
		}
	}
	return v
}

// TraceFields returns the message's trace context as entry field/value
// pairs (none without one), for callers that append entries themselves.
func (m *Message) TraceFields() []any { return m.appendTrace(nil) }

// appendTrace appends the message's trace context fields to v.
func (m *Message) appendTrace(v []any) []any {
	if m.TraceParent != "" {
		v = append(v, MetaTraceParent, m.TraceParent)
	}
	if m.TraceState != "" {
		v = append(v, MetaTraceState, m.TraceState)
	}
	return v
}

// reservedField reports whether an entry field is one of the message's own,
// never a Metadata entry.
func reservedField(k string) bool {
	switch k {
	case fieldKey, fieldType, fieldPayload, MetaTraceParent, MetaTraceState:
		return true
	}
	return false
}

// decodeMessage builds a message from a stream entry's fields.
func decodeMessage(stream string, partition int, id string, fields map[string]any) *Message {
	m := &Message{ID: id, Stream: stream, Partition: partition, Attempt: 1, deleted: len(fields) == 0}
	var reuse entryReuse
	for k, raw := range fields {
		s, _ := raw.(string)
		setField(m, k, s, &reuse)
	}
	_, before := retryFor(m)
	m.Attempt += before
	return m
}

// idMillis returns the millisecond part of a stream entry ID.
func idMillis(id string) (int64, bool) {
	i := strings.IndexByte(id, '-')
	if i <= 0 {
		return 0, false
	}
	ms, err := strconv.ParseInt(id[:i], 10, 64)
	return ms, err == nil
}

// parseID splits a stream ID into its millisecond and sequence parts.
func parseID(id string) (ms, seq uint64, ok bool) {
	i := strings.IndexByte(id, '-')
	if i <= 0 {
		return 0, 0, false
	}
	ms, err1 := strconv.ParseUint(id[:i], 10, 64)
	seq, err2 := strconv.ParseUint(id[i+1:], 10, 64)
	return ms, seq, err1 == nil && err2 == nil
}

// compareIDs orders two stream IDs; malformed IDs sort first.
func compareIDs(a, b string) int {
	am, as, aok := parseID(a)
	bm, bs, bok := parseID(b)
	switch {
	case !aok && !bok:
		return 0
	case !aok:
		return -1
	case !bok:
		return 1
	}
	return cmp.Or(cmp.Compare(am, bm), cmp.Compare(as, bs))
}

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
