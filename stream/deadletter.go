package stream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/internal/script"
)

// Dead-letter entry fields, beside the original message's fields.
const (
	dlqReason   = "dlq.reason"
	dlqStage    = "dlq.stage"
	dlqGroup    = "dlq.group"
	dlqAttempts = "dlq.attempts"
	dlqOrigin   = "dlq.origin_id"
	dlqAt       = "dlq.at"
	// maxReasonLen bounds the stored reason.
	maxReasonLen = 2048
)

// deadLetterScript moves entry ARGV[2] pending in group ARGV[1] of stream
// KEYS[1] to dead-letter stream KEYS[2] with fields ARGV[3..], counted in
// KEYS[3]; 0 when the entry is no longer pending.
var deadLetterScript = script.New(`
if redis.call('XACK', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('XADD', KEYS[2], '*', unpack(ARGV, 3))
redis.call('HINCRBY', KEYS[3], '` + countDead + `', 1)
return 1`)

// moveToDeadLetter appends the message with its reason to the partition's
// dead-letter stream and acknowledges it atomically, unless already settled.
func (r *Runner) moveToDeadLetter(ctx context.Context, p int, m *Message, reason error) error {
	args := append([]any{r.cfg.Group, m.ID}, m.values()...)
	args = append(args,
		dlqReason, clip.String(reason.Error(), maxReasonLen),
		dlqStage, r.stage.Name,
		dlqGroup, r.cfg.Group,
		dlqAttempts, strconv.Itoa(m.Attempt),
		dlqOrigin, m.ID,
		dlqAt, time.Now().UTC().Format(time.RFC3339Nano))
	keys := []string{m.Stream, r.stage.Topic.DeadLetterStream(p), r.stage.Topic.groupCountsKey(p, r.cfg.Group)}
	return deadLetterScript.Run(ctx, r.rdb, keys, args...).Err()
}

// DeadLetter is one entry of a dead-letter stream.
type DeadLetter struct {
	// ID is the entry's ID in the dead-letter stream.
	ID string
	// Partition is the partition the message came from.
	Partition int
	// OriginID is the message's ID in its original stream.
	OriginID string
	Reason   string
	Stage    string
	Group    string
	Attempts int
	At       time.Time
	Message  *Message
}

// Ref names a dead letter across a topic's partitions: "partition/ID"
// (partitions' dead-letter streams may share IDs).
func (d DeadLetter) Ref() string { return strconv.Itoa(d.Partition) + "/" + d.ID }

// ErrBadRef is wrapped by the errors of a malformed dead-letter ref.
var ErrBadRef = errors.New("dead letter ref")

// parseRef splits a ref into its partition and entry ID.
func parseRef(topic Topic, ref string) (int, string, error) {
	ps, id, ok := strings.Cut(ref, "/")
	p, err := strconv.Atoi(ps)
	if _, _, idOK := parseID(id); !ok || err != nil || p < 0 || p >= topic.Partitions || !idOK {
		return 0, "", fmt.Errorf("%w %q: want partition/entry-id, partition in 0..%d", ErrBadRef, ref, topic.Partitions-1)
	}
	return p, id, nil
}

// DeadLetters administers the dead-letter streams of topics.
type DeadLetters struct {
	rdb redis.UniversalClient
	// Progress, when set, is called with the running count after each dead
	// letter that Replay, or Purge with refs, has handled.
	Progress func(done int)
}

// NewDeadLetters returns the dead-letter administration over rdb.
func NewDeadLetters(rdb redis.UniversalClient) *DeadLetters { return &DeadLetters{rdb: rdb} }

// Count returns the number of dead letters of a topic, over all partitions.
func (d *DeadLetters) Count(ctx context.Context, topic Topic) (int64, error) {
	var total int64
	for p := 0; p < topic.Partitions; p++ {
		n, err := d.rdb.XLen(ctx, topic.DeadLetterStream(p)).Result()
		if err != nil {
			return 0, fmt.Errorf("dead letters of %s: %w", topic, err)
		}
		total += n
	}
	return total, nil
}

// List returns up to limit dead letters of a topic, oldest first within
// each partition, partitions in order.
func (d *DeadLetters) List(ctx context.Context, topic Topic, limit int) ([]DeadLetter, error) {
	return d.ListAfter(ctx, topic, "", limit)
}

// ListAfter is List from just after the ref after (empty: from the start),
// so a page's last ref is the next page's cursor, even once deleted.
func (d *DeadLetters) ListAfter(ctx context.Context, topic Topic, after string, limit int) ([]DeadLetter, error) {
	first, start := 0, "-"
	if after != "" {
		p, id, err := parseRef(topic, after)
		if err != nil {
			return nil, err
		}
		first, start = p, "("+id
	}
	var out []DeadLetter
	for p := first; p < topic.Partitions && len(out) < limit; p++ {
		from := "-"
		if p == first {
			from = start
		}
		xs, err := d.rdb.XRangeN(ctx, topic.DeadLetterStream(p), from, "+", int64(limit-len(out))).Result()
		if err != nil {
			return nil, fmt.Errorf("dead letters of %s: %w", topic, err)
		}
		for _, x := range xs {
			out = append(out, decodeDeadLetter(topic, p, x))
		}
	}
	return out, nil
}

func decodeDeadLetter(topic Topic, p int, x redis.XMessage) DeadLetter {
	dl := DeadLetter{ID: x.ID, Partition: p}
	orig := make(map[string]any, len(x.Values))
	for k, v := range x.Values {
		s, _ := v.(string)
		switch k {
		case dlqReason:
			dl.Reason = s
		case dlqStage:
			dl.Stage = s
		case dlqGroup:
			dl.Group = s
		case dlqAttempts:
			dl.Attempts, _ = strconv.Atoi(s)
		case dlqOrigin:
			dl.OriginID = s
		case dlqAt:
			dl.At, _ = time.Parse(time.RFC3339Nano, s)
		default:
			orig[k] = v
		}
	}
	dl.Message = decodeMessage(topic.Stream(p), p, dl.OriginID, orig)
	return dl
}

// Replay puts dead letters (by DeadLetter.Ref; all of the topic's when refs
// is empty) back on their streams as new messages and removes them,
// atomically per entry, and returns how many it replayed. Handlers guard
// their effects with the Ledger, so a replay applies none twice.
func (d *DeadLetters) Replay(ctx context.Context, topic Topic, refs ...string) (int, error) {
	return d.each(ctx, topic, refs, func(pipe redis.Pipeliner, dl DeadLetter) {
		dl.Message.Metadata = withoutDLQ(dl.Message.Metadata)
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: topic.Stream(dl.Partition), Values: dl.Message.values()})
		pipe.XDel(ctx, topic.DeadLetterStream(dl.Partition), dl.ID)
	})
}

// Purge deletes dead letters named by refs (DeadLetter.Ref values; all of
// the topic's when refs is empty) and returns how many were deleted.
func (d *DeadLetters) Purge(ctx context.Context, topic Topic, refs ...string) (int, error) {
	if len(refs) == 0 {
		n, err := d.Count(ctx, topic)
		for p := 0; p < topic.Partitions && err == nil; p++ {
			err = d.rdb.Del(ctx, topic.DeadLetterStream(p)).Err()
		}
		return int(n), err
	}
	return d.each(ctx, topic, refs, func(pipe redis.Pipeliner, dl DeadLetter) {
		pipe.XDel(ctx, topic.DeadLetterStream(dl.Partition), dl.ID)
	})
}

// each applies fn in one MULTI per dead letter named by refs (all when
// empty).
func (d *DeadLetters) each(ctx context.Context, topic Topic, refs []string, fn func(redis.Pipeliner, DeadLetter)) (int, error) {
	want := map[int]map[string]bool{} // partition: entry IDs
	for _, ref := range refs {
		p, id, err := parseRef(topic, ref)
		if err != nil {
			return 0, err
		}
		if want[p] == nil {
			want[p] = map[string]bool{}
		}
		want[p][id] = true
	}
	done := 0
	for p := 0; p < topic.Partitions; p++ {
		if len(refs) > 0 && want[p] == nil {
			continue
		}
		start := "-"
		for {
			xs, err := d.rdb.XRangeN(ctx, topic.DeadLetterStream(p), start, "+", 500).Result()
			if err != nil {
				return done, fmt.Errorf("dead letters of %s: %w", topic, err)
			}
			for _, x := range xs {
				if len(refs) > 0 && !want[p][x.ID] {
					continue
				}
				dl := decodeDeadLetter(topic, p, x)
				if _, err := d.rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error { fn(pipe, dl); return nil }); err != nil {
					return done, fmt.Errorf("dead letter %s: %w", dl.Ref(), err)
				}
				done++
				if d.Progress != nil {
					d.Progress(done)
				}
			}
			if len(xs) < 500 {
				break
			}
			start = "(" + xs[len(xs)-1].ID
		}
	}
	if len(refs) > 0 && done < len(refs) {
		return done, fmt.Errorf("%w: %d of %d dead letters", ErrNotFound, len(refs)-done, len(refs))
	}
	return done, nil
}

// ErrNotFound reports dead letters that do not exist.
var ErrNotFound = errors.New("stream: not found")

// withoutDLQ removes the dead-letter fields and the delivery count of a
// delayed retry: a replayed message starts its deliveries again.
func withoutDLQ(md map[string]string) map[string]string {
	for k := range md {
		if strings.HasPrefix(k, "dlq.") || k == MetaRetryAttempts || k == MetaRetryOrigin {
			delete(md, k)
		}
	}
	return md
}
