package writer

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/clickhouse"
)

// maxEvents is how many recent raw transitions per entity the analytics
// stage keeps to pair opens with closes.
const maxEvents = 16

// session returns the session row a raw transition writes, or nil. The
// transition is recorded in the entity's recent events and paired there with
// its neighbour in time, atomically, so the rows do not depend on the order
// in which copies of the stage, or redeliveries, process an entity's
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
func (a *Analytics) session(ctx context.Context, partition int, t clickhouse.TransitionRow) (*clickhouse.SessionRow, error) {
	state := "ds:" + a.topics.Transitions.HashTag(partition) + ":analytics:entity:" + t.EntityKey
	expireAt, _ := expiry(t.Date, a.cfg.RetainAfterDate)
	res, err := sessionScript.Run(ctx, a.rdb, []string{state}, t.RunAt.UnixMilli(), t.Kind,
		t.RunID, maxEvents, t.VenueName, expireAt).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("writer: pair session of %s: %w", t.EntityKey, err)
	}
	return a.sessionOf(t, res)
}

// sessionScript records a raw transition in an entity's recent events (the
// field "events": "<ms> <kind> <run id>" lines, newest first, once per kind
// and run, at most ARGV[4] of them) and returns the session row it implies:
// {"open", open ms, open run}, {"closed", open ms, open run, close ms, close
// run} or {"none"}, each followed by the entity's venue name (the field
// "name", set when ARGV[5] is not empty). KEYS: the entity's analytics
// hash. ARGV: ms, kind, run id, how many to keep, venue name, expiry (Unix
// ms, 0: none).
var sessionScript = redis.NewScript(`
local msS, kind, run = ARGV[1], ARGV[2], ARGV[3]
local ms = tonumber(msS)
if ARGV[5] ~= '' then redis.call('HSET', KEYS[1], 'name', ARGV[5]) end
local name = redis.call('HGET', KEYS[1], 'name') or ''
local cur = redis.call('HGET', KEYS[1], 'events')
local ev, pos = {}, nil
if cur then
  for line in string.gmatch(cur, '[^\n]+') do
    local a = string.find(line, ' ', 1, true)
    local b = a and string.find(line, ' ', a + 1, true)
    if b then
      local e = {msS = string.sub(line, 1, a - 1), kind = string.sub(line, a + 1, b - 1), run = string.sub(line, b + 1)}
      e.ms = tonumber(e.msS)
      ev[#ev + 1] = e
      if e.run == run and e.kind == kind then pos = #ev end
    end
  end
end
if not pos then
  pos = #ev + 1
  for i, e in ipairs(ev) do
    if ms > e.ms or (ms == e.ms and run > e.run) then pos = i; break end
  end
  table.insert(ev, pos, {ms = ms, msS = msS, kind = kind, run = run})
  while #ev > tonumber(ARGV[4]) do table.remove(ev) end
  local lines = {}
  for i, e in ipairs(ev) do lines[i] = e.msS .. ' ' .. e.kind .. ' ' .. e.run end
  redis.call('HSET', KEYS[1], 'events', table.concat(lines, '\n'))
  if ARGV[6] ~= '0' then redis.call('PEXPIREAT', KEYS[1], ARGV[6]) end
  if pos > #ev then return {'none', name} end
end
if kind == 'open' then
  local newer = ev[pos - 1]
  if newer and newer.kind == 'close' then return {'closed', msS, run, newer.msS, newer.run, name} end
  return {'open', msS, run, name}
end
local older = ev[pos + 1]
if older and older.kind == 'open' then return {'closed', older.msS, older.run, msS, run, name} end
return {'none', name}
`)
