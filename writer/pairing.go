package writer

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/clickhouse"
)

// maxEvents is how many recent raw transitions per entity the analytics
// stage keeps to pair opens with closes.
const maxEvents = 16

// maxPairPerScript bounds the transitions one pairScript call records, so
// that a call blocks Redis for a few milliseconds at most.
const maxPairPerScript = 256

// pairSessions records the raw transitions among rows (parts[i] is the
// partition of rows[i]) in their entities' recent events and returns the
// session rows they imply. Each transition is paired there with its
// neighbour in time, atomically, so the rows do not depend on the order in
// which copies of the stage, or redeliveries, process an entity's
// transitions:
//
//   - an open writes its session's closed row when the next known event is
//     a close, else its open row;
//   - a close writes the closed row of the session of the open right before
//     it, or nothing when that is not known yet (the open, when it comes,
//     writes the closed row).
//
// Every raw open starts a session (the diff emits opens only on flips; an
// open after an open means a close was lost, and the earlier session stays
// open). A pairing made before an intermediate close was known is corrected
// when it arrives: the closed row with the earliest close has the highest
// version (see clickhouse.SessionRow.Version). Replays write the same rows.
//
// The raw transitions of each partition go to pairScript in calls of up to
// maxPairPerScript, in the batch's order, all calls in one pipeline (per
// cluster node): every key of a call carries its partition's hash tag.
// Transitions of one entity (always of one partition) are thus paired in
// the batch's order; a call that fails with NOSCRIPT ran nothing and runs
// again, in order, once the script is loaded. On error nothing is
// returned; pairing the batch again is harmless, since recording a
// transition twice changes nothing.
func (a *Analytics) pairSessions(ctx context.Context, rows []clickhouse.TransitionRow, parts []int) ([]clickhouse.SessionRow, error) {
	type call struct {
		rows  []int // indices into rows
		keys  []string
		index map[string]int // key → its KEYS position, from 1
		exp   []any          // the expiry argument of each key
		args  []any          // pairArgsPer per transition
	}
	var calls []*call
	open := map[int]*call{}         // partition → its call being filled
	expireAt := map[string]string{} // date → the expiry argument of its hash
	for i := range rows {
		t := &rows[i]
		if !t.Raw {
			continue
		}
		c := open[parts[i]]
		if c == nil || len(c.rows) == maxPairPerScript {
			c = &call{index: map[string]int{}}
			calls = append(calls, c)
			open[parts[i]] = c
		}
		key := "ds:" + a.topics.Transitions.HashTag(parts[i]) + ":analytics:date:" + t.Date
		k, ok := c.index[key]
		if !ok {
			exp, ok := expireAt[t.Date]
			if !ok {
				ms, _ := expiry(t.Date, a.cfg.RetainAfterDate)
				exp = strconv.FormatInt(ms, 10)
				expireAt[t.Date] = exp
			}
			c.keys = append(c.keys, key)
			c.exp = append(c.exp, exp)
			k = len(c.keys)
			c.index[key] = k
		}
		c.rows = append(c.rows, i)
		c.args = append(c.args, k, t.EntityKey, strconv.FormatInt(t.RunAt.UnixMilli(), 10), t.Kind, t.RunID, t.VenueName)
	}
	replies := make([][]string, len(calls))
	todo := make([]int, len(calls))
	for i := range todo {
		todo[i] = i
	}
	for attempt := 0; len(todo) > 0; attempt++ {
		pipe := a.rdb.Pipeline()
		cmds := make([]*redis.Cmd, len(todo))
		for j, ci := range todo {
			c := calls[ci]
			args := make([]any, 0, 2+len(c.exp)+len(c.args))
			args = append(append(append(args, maxEvents, len(c.exp)), c.exp...), c.args...)
			cmds[j] = pairScript.EvalSha(ctx, pipe, c.keys, args...)
		}
		_, _ = pipe.Exec(ctx) // errors are read per command
		var missing []int
		for j, c := range todo {
			res, err := cmds[j].StringSlice()
			switch {
			case err == nil && len(res) == pairReplyLen*len(calls[c].rows):
				replies[c] = res
			case err == nil:
				return nil, fmt.Errorf("writer: pair sessions: %d replies for %d transitions", len(res), len(calls[c].rows))
			case attempt == 0 && isNoScript(err):
				missing = append(missing, c)
			default:
				return nil, fmt.Errorf("writer: pair sessions of %s and %d more: %w",
					rows[calls[c].rows[0]].EntityKey, len(calls[c].rows)-1, err)
			}
		}
		if len(missing) > 0 {
			if err := pairScript.Load(ctx, a.rdb).Err(); err != nil {
				return nil, fmt.Errorf("writer: load pairing script: %w", err)
			}
		}
		todo = missing
	}
	var out []clickhouse.SessionRow
	for i, c := range calls {
		for j, r := range c.rows {
			reply := replies[i][pairReplyLen*j : pairReplyLen*(j+1)]
			s, ok, err := a.sessionOf(&rows[r], reply)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, s)
			}
		}
	}
	return out, nil
}

// pairReplyLen is the length of pairScript's reply per transition.
const pairReplyLen = 4

// sessionOf reads pairScript's reply for transition t — its state ("open",
// "closed" or "none"), the time (Unix ms) and run id of the event it is
// paired with, and the venue name recorded for the entity when t has none
// — and returns the session row it implies, if any.
func (a *Analytics) sessionOf(t *clickhouse.TransitionRow, reply []string) (clickhouse.SessionRow, bool, error) {
	state, otherMs, otherRun, name := reply[0], reply[1], reply[2], reply[3]
	if t.VenueName != "" {
		name = t.VenueName
	}
	s := clickhouse.SessionRow{EntityKey: t.EntityKey, EntityKind: t.EntityKind, Provider: t.Provider,
		Venue: t.Venue, VenueName: name, Date: t.Date, SlotTime: t.SlotTime, PartySize: t.PartySize,
		ScopeKey: t.ScopeKey, SourceID: t.SourceID, TraceID: t.TraceID}
	// Both ends in whole milliseconds, as recorded: the closed row an open
	// writes and the one its close writes are the same.
	own := time.UnixMilli(t.RunAt.UnixMilli()).UTC()
	switch {
	case state == "open" && t.Kind == avail.KindOpen:
		s.OpenRunID, s.OpenedAt = t.RunID, own
	case state == "closed" && t.Kind == avail.KindOpen:
		s.OpenRunID, s.OpenedAt = t.RunID, own
		s.Closed, s.CloseRunID, s.ClosedAt = true, otherRun, msTime(otherMs)
	case state == "closed" && t.Kind == avail.KindClose:
		s.OpenRunID, s.OpenedAt = otherRun, msTime(otherMs)
		s.Closed, s.CloseRunID, s.ClosedAt = true, t.RunID, own
	case state == "none":
		if t.Kind == avail.KindClose {
			a.met.unmatched.Add(context.Background(), 1)
		}
		return clickhouse.SessionRow{}, false, nil
	default:
		return clickhouse.SessionRow{}, false, fmt.Errorf("writer: pair session of %s: bad reply %q", t.EntityKey, reply)
	}
	if s.OpenedAt.IsZero() || s.Closed && (s.ClosedAt.IsZero() || s.CloseRunID == "") || s.OpenRunID == "" {
		return clickhouse.SessionRow{}, false, fmt.Errorf("writer: pair session of %s: bad reply %q", t.EntityKey, reply)
	}
	s.SessionID = avail.SessionID(t.EntityKey, s.OpenRunID)
	if s.Closed {
		s.Duration = max(s.ClosedAt.Sub(s.OpenedAt), 0)
	}
	return s, true, nil
}

// pairScript records raw transitions in their entities' recent events and
// replies, per transition, the session row it implies (see pairSessions).
// KEYS are the hashes of the transitions' dates (one per date of the call,
// in one partition): a field per entity, its value the venue name last
// given as "<length>:<name>" (it may hold any byte), then "\n<ms> <kind>
// <run id>" per event, newest first, once per
// kind and run, at most ARGV[1] of them. ARGV[2] is the number of KEYS,
// then one expiry per key (Unix ms, 0: none, set at every call), then six
// per transition: its key's position in KEYS, entity key, ms, kind, run id,
// venue name (empty: unknown). Transitions are recorded in order. The reply
// holds pairReplyLen strings per transition: "open" (an open whose next
// known event is not a close), "closed" (an open followed by a close, or a
// close preceded by an open) or "none"; then the time and run id of the
// other end of a closed session (else empty); then the recorded venue name
// when the transition gave none (else empty). It reads each key's fields
// with one HMGET and writes those that changed with one HSET: a few
// redis.call per call rather than three per transition, and no key per
// entity, which cost Redis most of the stage's CPU.
var pairScript = redis.NewScript(`
local keep, nkeys = tonumber(ARGV[1]), tonumber(ARGV[2])
local first = 3 + nkeys
local vals, dirty, want = {}, {}, {} -- per key: field values, fields changed, fields to read
for k = 1, nkeys do vals[k], dirty[k], want[k] = {}, {}, {} end
for a = first, #ARGV, 6 do
  local k, f = tonumber(ARGV[a]), ARGV[a + 1]
  if vals[k][f] == nil then
    vals[k][f] = false
    want[k][#want[k] + 1] = f
  end
end
for k = 1, nkeys do
  if #want[k] > 0 then
    local got = redis.call('HMGET', KEYS[k], unpack(want[k]))
    for i, f in ipairs(want[k]) do vals[k][f] = got[i] or false end
  end
end
local out = {}
local t = 0
for a = first, #ARGV, 6 do
  t = t + 1
  local k, f, msS, kind, run, newName = tonumber(ARGV[a]), ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5]
  local cur = vals[k][f]
  local state, oms, orun, name = 'none', '', '', ''
  if not cur then
    vals[k][f] = #newName .. ':' .. newName .. '\n' .. msS .. ' ' .. kind .. ' ' .. run
    dirty[k][f] = true
    if kind == 'open' then state = 'open' end
  else
    local c = string.find(cur, ':', 1, true)
    local nameEnd = c + tonumber(string.sub(cur, 1, c - 1))
    name = string.sub(cur, c + 1, nameEnd)
    local ms = tonumber(msS)
    local ev, pos = {}, nil
    for line in string.gmatch(string.sub(cur, nameEnd + 1), '[^\n]+') do
      local x = string.find(line, ' ', 1, true)
      local y = x and string.find(line, ' ', x + 1, true)
      if y then
        local e = {msS = string.sub(line, 1, x - 1), kind = string.sub(line, x + 1, y - 1), run = string.sub(line, y + 1)}
        e.ms = tonumber(e.msS)
        ev[#ev + 1] = e
        if e.run == run and e.kind == kind then pos = #ev end
      end
    end
    local setName = newName ~= '' and newName ~= name
    local inserted, lost = not pos, false
    if inserted then
      pos = #ev + 1
      for i, e in ipairs(ev) do
        if ms > e.ms or (ms == e.ms and run > e.run) then pos = i; break end
      end
      table.insert(ev, pos, {ms = ms, msS = msS, kind = kind, run = run})
      while #ev > keep do table.remove(ev) end
      lost = pos > #ev
    end
    if setName then name = newName end
    if inserted or setName then
      local lines = {#name .. ':' .. name}
      for i, e in ipairs(ev) do lines[i + 1] = e.msS .. ' ' .. e.kind .. ' ' .. e.run end
      vals[k][f] = table.concat(lines, '\n')
      dirty[k][f] = true
    end
    if lost then
      state = 'none'
    elseif kind == 'open' then
      local newer = ev[pos - 1]
      if newer and newer.kind == 'close' then
        state, oms, orun = 'closed', newer.msS, newer.run
      else
        state = 'open'
      end
    else
      local older = ev[pos + 1]
      if older and older.kind == 'open' then state, oms, orun = 'closed', older.msS, older.run end
    end
  end
  local b = 4 * t - 3
  out[b], out[b + 1], out[b + 2], out[b + 3] = state, oms, orun, ''
  if newName == '' then out[b + 3] = name end
end
for k = 1, nkeys do
  local set = {}
  for f in pairs(dirty[k]) do
    set[#set + 1] = f
    set[#set + 1] = vals[k][f]
  end
  if #set > 0 then redis.call('HSET', KEYS[k], unpack(set)) end
  if ARGV[2 + k] ~= '0' then redis.call('PEXPIREAT', KEYS[k], ARGV[2 + k]) end
end
return out
`)
