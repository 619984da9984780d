package stream

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/dropstream/dropstream/internal/script"
)

// Delayed retries. A message whose handler returns RetryAfter(err, d) is
// acknowledged and parked in its group and partition's delay set (a sorted
// set by due time), so the next messages flow. Before their reads, copies
// move due messages back onto the stream exactly once, as new entries
// carrying group, delivery count and first ID: other groups skip them.

// Metadata of a requeued message.
const (
	// MetaRetryGroup is the consumer group a requeued message is for.
	MetaRetryGroup = "retry.group"
	// MetaRetryAttempts is how many deliveries the message had before it
	// was parked.
	MetaRetryAttempts = "retry.attempts"
	// MetaRetryOrigin is the ID of the entry that was parked.
	MetaRetryOrigin = "retry.origin_id"
)

// parkScript acknowledges entry ARGV[2] of stream KEYS[1] for group
// ARGV[1] and adds the encoded message ARGV[4] to the delay set KEYS[2],
// due at ARGV[3] (Unix ms); 0 when the entry was no longer pending.
var parkScript = script.New(`
if redis.call('XACK', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4])
return 1`)

// requeueScript moves up to ARGV[2] members of delay set KEYS[1] due by
// ARGV[1] (Unix ms) onto stream KEYS[2], counted in KEYS[3], and returns
// {moved, next due time or -1}. A member is netstrings "<len>:<bytes>" of
// the entry's fields and values.
var requeueScript = script.New(`
local function fields(s)
  local out, i = {}, 1
  while i <= #s do
    local c = string.find(s, ':', i, true)
    local n = tonumber(string.sub(s, i, c - 1))
    out[#out + 1] = string.sub(s, c + 1, c + n)
    i = c + n + 1
  end
  return out
end
local moved = 0
for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])) do
  if redis.call('ZREM', KEYS[1], m) == 1 then
    redis.call('XADD', KEYS[2], '*', unpack(fields(m)))
    moved = moved + 1
  end
end
if moved > 0 then redis.call('HINCRBY', KEYS[3], '` + countRequeued + `', moved) end
local nxt = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if #nxt == 0 then return {moved, -1} end
return {moved, tonumber(nxt[2])}`)

// encodeParked encodes the fields of a message to requeue as netstrings.
func encodeParked(values []any) string {
	var b strings.Builder
	for _, v := range values {
		s := fmt.Sprintf("%s", v) // a string or a []byte
		fmt.Fprintf(&b, "%d:%s", len(s), s)
	}
	return b.String()
}

// park moves m to its partition's delay set, due after delay; on failure it
// stays pending and is redelivered after ClaimIdle.
func (r *Runner) park(ctx context.Context, st *partitionState, m *Message, delay time.Duration) {
	md := make(map[string]string, len(m.Metadata)+3)
	maps.Copy(md, m.Metadata)
	md[MetaRetryGroup] = r.cfg.Group
	md[MetaRetryAttempts] = strconv.Itoa(m.Attempt)
	md[MetaRetryOrigin] = m.ID
	parked := &Message{Key: m.Key, Type: m.Type, Payload: m.Payload, TraceParent: m.TraceParent, TraceState: m.TraceState, Metadata: md}
	due := time.Now().Add(delay)
	keys := []string{st.stream, r.stage.Topic.delayedKey(st.p, r.cfg.Group)}
	err := parkScript.Run(ctx, r.rdb, keys, r.cfg.Group, m.ID, due.UnixMilli(), encodeParked(parked.values())).Err()
	if err != nil {
		r.tel.Logger.WarnContext(ctx, "parking a message for a delayed retry failed; it stays pending",
			"stage", r.stage.Name, "id", m.ID, "error", err)
		return
	}
	if due.Before(st.nextRequeue) {
		st.nextRequeue = due
	}
}

// requeueDue moves the partition's due parked messages back onto its
// stream when the earliest due time known has come, and learns the next.
func (r *Runner) requeueDue(ctx context.Context, st *partitionState) error {
	now := time.Now()
	if now.Before(st.nextRequeue) {
		return nil
	}
	keys := []string{r.stage.Topic.delayedKey(st.p, r.cfg.Group), st.stream, r.stage.Topic.groupCountsKey(st.p, r.cfg.Group)}
	res, err := requeueScript.Run(ctx, r.rdb, keys, now.UnixMilli(), r.cfg.BatchSize).Int64Slice()
	if err != nil {
		return err
	}
	st.nextRequeue = now.Add(r.cfg.ClaimInterval)
	if len(res) == 2 && res[1] >= 0 {
		if next := time.UnixMilli(res[1]); next.Before(st.nextRequeue) {
			st.nextRequeue = next
		}
	}
	if res[0] > 0 {
		r.tel.Logger.DebugContext(ctx, "requeued delayed messages", "stage", r.stage.Name, "stream", st.stream, "count", res[0])
	}
	return nil
}

// retryFor returns the group a requeued message is for ("" for any) and
// the deliveries it had before it was parked.
func retryFor(m *Message) (group string, attempts int) {
	group = m.Metadata[MetaRetryGroup]
	if s := m.Metadata[MetaRetryAttempts]; s != "" { // Atoi allocates its error
		attempts, _ = strconv.Atoi(s)
	}
	return group, max(attempts, 0)
}
