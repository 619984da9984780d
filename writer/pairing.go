package writer

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/clickhouse"
)

// maxPairPerScript bounds the transitions one pairScript call records, so
// that a call blocks Redis for a few milliseconds at most.
const maxPairPerScript = 256

// pairSessions records the raw transitions among rows (parts[i] is the
// partition of rows[i]) in their entities' pairing state and returns the
// session rows they imply, as session does for one transition. The raw
// transitions of each partition go to pairScript in calls of up to
// maxPairPerScript, in the batch's order, all calls in one pipeline (per
// cluster node): every key of a call carries its partition's hash tag.
// Transitions of one entity (always of one partition) are thus paired in
// the batch's order; a call that fails with NOSCRIPT ran nothing and runs
// again, in order, once the script is loaded. On error nothing is
// returned; pairing the batch again is harmless, since recording a
// transition twice changes nothing.
func (a *Analytics) pairSessions(ctx context.Context, rows []clickhouse.TransitionRow, parts []int) ([]clickhouse.SessionRow, error) {
	type call struct {
		rows []int // indices into rows
		keys []string
		args []any
	}
	var calls []*call
	open := map[int]*call{} // partition → its call being filled
	for i := range rows {
		t := &rows[i]
		if !t.Raw {
			continue
		}
		c := open[parts[i]]
		if c == nil || len(c.rows) == maxPairPerScript {
			c = &call{args: []any{maxEvents}}
			calls = append(calls, c)
			open[parts[i]] = c
		}
		expireAt, _ := expiry(t.Date, a.cfg.RetainAfterDate)
		c.rows = append(c.rows, i)
		c.keys = append(c.keys, "ds:"+a.topics.Transitions.HashTag(parts[i])+":analytics:entity:"+t.EntityKey)
		c.args = append(c.args, strconv.FormatInt(t.RunAt.UnixMilli(), 10), t.Kind, t.RunID, t.VenueName,
			strconv.FormatInt(expireAt, 10))
	}
	replies := make([][]any, len(calls))
	todo := make([]int, len(calls))
	for i := range todo {
		todo[i] = i
	}
	for attempt := 0; len(todo) > 0; attempt++ {
		pipe := a.rdb.Pipeline()
		cmds := make([]*redis.Cmd, len(todo))
		for j, c := range todo {
			cmds[j] = pairScript.EvalSha(ctx, pipe, calls[c].keys, calls[c].args...)
		}
		_, _ = pipe.Exec(ctx) // errors are read per command
		var missing []int
		for j, c := range todo {
			res, err := cmds[j].Slice()
			switch {
			case err == nil && len(res) == len(calls[c].rows):
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
			res, err := stringsOf(replies[i][j])
			if err != nil {
				return nil, fmt.Errorf("writer: pair session of %s: %w", rows[r].EntityKey, err)
			}
			s, err := a.sessionOf(rows[r], res)
			if err != nil {
				return nil, err
			}
			if s != nil {
				out = append(out, *s)
			}
		}
	}
	return out, nil
}

// stringsOf reads one element of pairScript's reply: an array of strings.
func stringsOf(v any) ([]string, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("bad reply %v", v)
	}
	out := make([]string, len(list))
	for i, e := range list {
		if out[i], ok = e.(string); !ok {
			return nil, fmt.Errorf("bad reply %v", v)
		}
	}
	return out, nil
}

// pairScript is sessionScript for many transitions at once: KEYS[i] is
// the analytics hash of transition i's entity; ARGV[1] is how many events
// to keep, then five per transition: ms, kind, run id, venue name, expiry
// (Unix ms, 0: none). It records them in order and replies, per
// transition, what sessionScript replies. It reads both fields with one
// HMGET and writes them with at most one HSET, and only what changed.
var pairScript = redis.NewScript(`
local keep = tonumber(ARGV[1])
local out = {}
for t = 1, #KEYS do
  local key, a = KEYS[t], 5 * t - 3
  local msS, kind, run, newName, expireAt = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4]
  local ms = tonumber(msS)
  local got = redis.call('HMGET', key, 'name', 'events')
  local name, cur = got[1] or '', got[2]
  local setName = newName ~= '' and newName ~= name
  if newName ~= '' then name = newName end
  local ev, pos = {}, nil
  if cur then
    for line in string.gmatch(cur, '[^\n]+') do
      local x = string.find(line, ' ', 1, true)
      local y = x and string.find(line, ' ', x + 1, true)
      if y then
        local e = {msS = string.sub(line, 1, x - 1), kind = string.sub(line, x + 1, y - 1), run = string.sub(line, y + 1)}
        e.ms = tonumber(e.msS)
        ev[#ev + 1] = e
        if e.run == run and e.kind == kind then pos = #ev end
      end
    end
  end
  local res
  if not pos then
    pos = #ev + 1
    for i, e in ipairs(ev) do
      if ms > e.ms or (ms == e.ms and run > e.run) then pos = i; break end
    end
    table.insert(ev, pos, {ms = ms, msS = msS, kind = kind, run = run})
    while #ev > keep do table.remove(ev) end
    local lines = {}
    for i, e in ipairs(ev) do lines[i] = e.msS .. ' ' .. e.kind .. ' ' .. e.run end
    if setName then
      redis.call('HSET', key, 'events', table.concat(lines, '\n'), 'name', name)
    else
      redis.call('HSET', key, 'events', table.concat(lines, '\n'))
    end
    setName = false
    if expireAt ~= '0' then redis.call('PEXPIREAT', key, expireAt) end
    if pos > #ev then res = {'none', name} end
  end
  if setName then redis.call('HSET', key, 'name', name) end
  if not res then
    if kind == 'open' then
      local newer = ev[pos - 1]
      if newer and newer.kind == 'close' then
        res = {'closed', msS, run, newer.msS, newer.run, name}
      else
        res = {'open', msS, run, name}
      end
    else
      local older = ev[pos + 1]
      if older and older.kind == 'open' then
        res = {'closed', older.msS, older.run, msS, run, name}
      else
        res = {'none', name}
      end
    end
  end
  out[t] = res
end
return out
`)
