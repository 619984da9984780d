package stream

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/rediskey"
	"github.com/dropstream/dropstream/internal/script"
)

// Accounting. Every entry a group can read is in exactly one place, so
// per group and partition
//
//	published = acked + dead_lettered + dropped + skipped + delayed + requeued + pending + lag
//
// published is XINFO STREAM's entries-added less what was gone before the
// group (or, without it, the length plus what the Trimmer removed). Each
// settlement counts itself by what its XACK reports, in the same script,
// so a double settlement counts once; one script reads a partition's
// terms, so a non-zero drift means entries lost or counted twice.

// Counter fields of a group's counters hash.
const (
	countBase     = "base" // entries gone from the stream before the group existed
	countAcked    = "acked"
	countDead     = "dead_lettered"
	countDropped  = "dropped"
	countSkipped  = "skipped"
	countRequeued = "requeued"
	// countTrimmed, in the topic's counters hash, counts the entries the
	// Trimmer removed.
	countTrimmed = "trimmed"
)

// countsKeyOf is the counters hash of a stream: "<stream>:counts".
func countsKeyOf(stream string) string { return stream + rediskey.Sep + "counts" }

// countsKey is the counters hash of partition p of the topic.
func (t Topic) countsKey(p int) string { return countsKeyOf(t.Stream(p)) }

// groupCountsKey is the counters hash of group on partition p.
func (t Topic) groupCountsKey(p int, group string) string {
	return countsKeyOf(t.Stream(p)) + rediskey.Sep + group
}

// delayedKey is the delay set of group on partition p: messages parked
// for a delayed retry, scored by when they are due (Unix ms).
func (t Topic) delayedKey(p int, group string) string {
	return rediskey.Partition(t.Flow, p, t.Name, "delayed", group)
}

// ackKind is how an acknowledged entry was settled.
type ackKind int

const (
	ackHandled ackKind = iota // handled: counted as acked
	ackDropped                // ErrDrop: counted as dropped
	ackSkipped                // another group's delayed retry
	ackDeleted                // deleted from the stream while pending: not counted
	ackKinds
)

// ackSet is a partition's acknowledgements to send, by kind.
type ackSet struct {
	ids [ackKinds][]string
}

func (a *ackSet) add(kind ackKind, id string) { a.ids[kind] = append(a.ids[kind], id) }

func (a *ackSet) addAll(b *ackSet) {
	for k := range a.ids {
		a.ids[k] = append(a.ids[k], b.ids[k]...)
	}
}

func (a *ackSet) len() int {
	n := 0
	for _, ids := range a.ids {
		n += len(ids)
	}
	return n
}

func (a *ackSet) clear() {
	for k := range a.ids {
		a.ids[k] = a.ids[k][:0]
	}
}

// ackScript acknowledges entries of stream KEYS[1] for group ARGV[1] and
// counts each kind by what XACK reports in the group's counters hash
// KEYS[2]. ARGV[2..5] are how many ids of each kind follow, in ackKind
// order.
var ackScript = script.New(`
local fields = {'` + countAcked + `', '` + countDropped + `', '` + countSkipped + `', false}
local i = 6
for k = 1, 4 do
  local n = tonumber(ARGV[k + 1])
  if n > 0 then
    local done = redis.call('XACK', KEYS[1], ARGV[1], unpack(ARGV, i, i + n - 1))
    if fields[k] and done > 0 then
      redis.call('HINCRBY', KEYS[2], fields[k], done)
    end
    i = i + n
  end
end
return 1`)

// ackCall is the ackScript call acknowledging a on partition p.
func (r *Runner) ackCall(p int, a *ackSet) script.Call {
	args := make([]any, 0, 5+a.len())
	args = append(args, r.cfg.Group)
	for _, ids := range a.ids {
		args = append(args, len(ids))
	}
	for _, ids := range a.ids {
		for _, id := range ids {
			args = append(args, id)
		}
	}
	return script.Call{Keys: []string{r.stage.Topic.Stream(p), r.stage.Topic.groupCountsKey(p, r.cfg.Group)}, Args: args}
}

// ack sends the acknowledgements a of partition p now.
func (r *Runner) ack(ctx context.Context, p int, a *ackSet) error {
	c := r.ackCall(p, a)
	return ackScript.Run(ctx, r.rdb, c.Keys, c.Args...).Err()
}

// publishedLua defines added(stream, counters): the entries ever added to
// the stream — XINFO STREAM's entries-added where the server reports it,
// else its length plus what the Trimmer removed (counters hash).
const publishedLua = `
local function added(stream, counters)
  local info = redis.call('XINFO', 'STREAM', stream)
  for i = 1, #info, 2 do
    if info[i] == 'entries-added' and info[i + 1] then return tonumber(info[i + 1]) end
  end
  return redis.call('XLEN', stream) + tonumber(redis.call('HGET', counters, '` + countTrimmed + `') or '0')
end
`

// createGroupScript creates group ARGV[1] on stream KEYS[1] (and the
// stream) reading from its start, and records in its counters hash KEYS[3]
// the entries gone from the stream before (topic counters KEYS[2]); 0
// when the group exists.
var createGroupScript = script.New(publishedLua + `
local ok = redis.pcall('XGROUP', 'CREATE', KEYS[1], ARGV[1], '0', 'MKSTREAM')
if type(ok) == 'table' and ok.err then
  if string.sub(ok.err, 1, 9) == 'BUSYGROUP' then return 0 end
  return ok
end
redis.call('HSET', KEYS[3], '` + countBase + `', added(KEYS[1], KEYS[2]) - redis.call('XLEN', KEYS[1]))
return 1`)

// createGroup creates group on partition p of topic if it is missing.
func createGroup(ctx context.Context, rdb redis.UniversalClient, topic Topic, p int, group string) error {
	err := createGroupScript.Run(ctx, rdb, []string{topic.Stream(p), topic.countsKey(p), topic.groupCountsKey(p, group)}, group).Err()
	if err != nil {
		return fmt.Errorf("create group %s on %s: %w", group, topic.Stream(p), err)
	}
	return nil
}

// snapshotScript reads group ARGV[1]'s accounting terms on stream KEYS[1]
// (topic counters KEYS[2], group counters KEYS[3], delay set KEYS[4],
// dead letters KEYS[5]) at one instant: {found, added, base, acked,
// dead_lettered, dropped, skipped, requeued, delayed, pending, lag, lag
// known, dead letters now, oldest pending entry's Unix ms or 0}, lag counted
// up to ARGV[2] where XINFO cannot tell. ARGV[3] = 1 sets a missing base so
// the group's entries so far are accounted for.
var snapshotScript = script.New(publishedLua + `
local function num(v) return tonumber(v or '0') or 0 end
if redis.call('EXISTS', KEYS[1]) == 0 then return {0} end
local g = nil
for _, raw in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
  local f = {}
  for i = 1, #raw, 2 do f[raw[i]] = raw[i + 1] end
  if f['name'] == ARGV[1] then g = f end
end
if not g then return {0} end
local published = added(KEYS[1], KEYS[2])
local delayed = redis.call('ZCARD', KEYS[4])
local lag, known = g['lag'], 1
local read = g['entries-read']
if redis.call('XLEN', KEYS[1]) == 0 then
  lag = 0 -- Redis counts entries deleted unread from an empty stream as lag
elseif not lag or ((not read or read == 0) and g['last-delivered-id'] ~= '0-0') then
  local cap = tonumber(ARGV[2])
  lag = #redis.call('XRANGE', KEYS[1], '(' .. g['last-delivered-id'], '+', 'COUNT', cap)
  if lag >= cap then known = 0 end
end
if ARGV[3] == '1' and known == 1 and redis.call('EXISTS', KEYS[3]) == 0 then
  redis.call('HSET', KEYS[3], '` + countBase + `', published - g['pending'] - lag - delayed)
end
local oldest = 0
if g['pending'] > 0 then
  local p = redis.call('XPENDING', KEYS[1], ARGV[1])
  if p[2] then oldest = tonumber(string.match(p[2], '^%d+')) end
end
local c = redis.call('HMGET', KEYS[3], '` + countBase + `', '` + countAcked + `', '` + countDead + `', '` + countDropped + `', '` + countSkipped + `', '` + countRequeued + `')
return {1, published, num(c[1]), num(c[2]), num(c[3]), num(c[4]), num(c[5]), num(c[6]), delayed, g['pending'], lag, known,
  redis.call('XLEN', KEYS[5]), oldest}`)

// Conservation is the accounting of a stage's consumer group over every
// partition of its topic. Published equals the sum of the other terms
// unless entries were lost or counted twice: Drift is the difference, 0
// when all is well. The terms of each partition are read at one instant.
type Conservation struct {
	Topic string `json:"stream"`
	Group string `json:"group"`
	// Published counts the entries added to the streams since the group
	// exists (requeued retries and replayed dead letters included).
	Published int64 `json:"published"`
	// Acked counts entries acknowledged after their handling.
	Acked int64 `json:"acked"`
	// DeadLettered counts entries moved to the dead-letter streams
	// (replayed ones included: a replay publishes them again).
	DeadLettered int64 `json:"dead_lettered"`
	// Dropped counts entries the handler skipped with ErrDrop.
	Dropped int64 `json:"dropped"`
	// Skipped counts entries that were another group's delayed retries.
	Skipped int64 `json:"skipped"`
	// Delayed counts the entries parked now for a delayed retry.
	Delayed int64 `json:"delayed"`
	// Requeued counts parked entries put back on the streams.
	Requeued int64 `json:"requeued"`
	// Pending counts entries delivered and not settled yet.
	Pending int64 `json:"pending"`
	// Lag counts entries not yet delivered to the group.
	Lag int64 `json:"lag"`
	// LagKnown is false when the lag could not be counted (more than
	// lagCountCap entries after the group's position on a Redis that does
	// not report it); Drift is then meaningless and reported as 0.
	LagKnown bool `json:"lag_known"`
	// Drift is Published less every other term: 0 when every entry is
	// accounted for.
	Drift int64 `json:"drift"`
}

// snapshot is the accounting with what the stage's stats read beside it:
// the dead letters now, and the publish time (Unix ms) of the oldest
// pending entry, 0 when none.
type snapshot struct {
	Conservation
	deadLetters, oldestMs int64
}

// add adds one partition's snapshot reply.
func (c *snapshot) add(v []int64) {
	if len(v) < 14 || v[0] == 0 {
		return
	}
	c.Published += v[1] - v[2]
	c.Acked += v[3]
	c.DeadLettered += v[4]
	c.Dropped += v[5]
	c.Skipped += v[6]
	c.Requeued += v[7]
	c.Delayed += v[8]
	c.Pending += v[9]
	c.Lag += v[10]
	c.LagKnown = c.LagKnown && v[11] == 1
	c.deadLetters += v[12]
	if v[13] > 0 && (c.oldestMs == 0 || v[13] < c.oldestMs) {
		c.oldestMs = v[13]
	}
}

// lagCountCap bounds the count of undelivered entries where Redis cannot
// tell the lag.
const lagCountCap = 10000

// conserve reads the accounting of group over the given partitions of
// topic; init sets the base of groups older than the counting.
func conserve(ctx context.Context, rdb redis.UniversalClient, topic Topic, group string, partitions []int, init bool) (snapshot, error) {
	out := snapshot{Conservation: Conservation{Topic: topic.String(), Group: group, LagKnown: true}}
	calls := make([]script.Call, 0, len(partitions))
	flag := "0"
	if init {
		flag = "1"
	}
	for _, p := range partitions {
		calls = append(calls, script.Call{
			Keys: []string{topic.Stream(p), topic.countsKey(p), topic.groupCountsKey(p, group), topic.delayedKey(p, group), topic.DeadLetterStream(p)},
			Args: []any{group, lagCountCap, flag},
		})
	}
	cmds, err := snapshotScript.RunAll(ctx, rdb, calls)
	if err != nil {
		return out, fmt.Errorf("accounting of %s/%s: %w", topic, group, err)
	}
	for i, cmd := range cmds {
		v, err := cmd.Int64Slice()
		if err != nil {
			return out, fmt.Errorf("accounting of %s/%s: %w", topic.Stream(partitions[i]), group, err)
		}
		out.add(v)
	}
	if out.LagKnown {
		out.Drift = out.Published - (out.Acked + out.DeadLettered + out.Dropped + out.Skipped + out.Delayed + out.Requeued + out.Pending + out.Lag)
	}
	return out, nil
}

// Conservation reads the accounting of a consumer group over every
// partition of its topic (for a stage, StageInfo's Topic and Group).
func (c *Control) Conservation(ctx context.Context, topic Topic, group string) (Conservation, error) {
	all := make([]int, topic.Partitions)
	for p := range all {
		all[p] = p
	}
	s, err := conserve(ctx, c.rdb, topic, group, all, false)
	return s.Conservation, err
}

// trimScript trims stream KEYS[1] to MINID ARGV[1] and counts what it
// removed in the topic's counters hash KEYS[2].
var trimScript = script.New(`
local n = redis.call('XTRIM', KEYS[1], 'MINID', ARGV[1])
if n > 0 then redis.call('HINCRBY', KEYS[2], '` + countTrimmed + `', n) end
return n`)
