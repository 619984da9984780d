-- diff.lua applies one snapshot of one scope atomically; see script.go for
-- KEYS and ARGV and the package documentation for the semantics. Every read
-- and check comes before the first write: Redis does not roll a script back.
local open_key, scope_hash, pend_key, tr_stream, run_stream, legacy_key, flaps_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local run_id, run_at_ms, run_at, started_at = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local scope, source_id, provider = ARGV[5], ARGV[6], ARGV[7]
local ok, err_msg, k, nfs = ARGV[8] == '1', ARGV[9], tonumber(ARGV[10]), ARGV[11] == '1'
local traceparent, trace_id, ttl = ARGV[12], ARGV[13], ARGV[14]
local guard_min, guard_permille = tonumber(ARGV[15]), tonumber(ARGV[16])
local maxk = tonumber(ARGV[17]) -- per-venue stabilization's largest k; 0: off
-- ARGV[18] is the number of observed entities, ARGV[DEFAULT] the argument
-- of every entity not listed among the overrides, ARGV[FIRST..LAST] their
-- keys, and ARGV[LAST+1..] (key's ARGV index, argument) pairs, the
-- overrides: see entity_json.
local nobs = tonumber(ARGV[18])
local DEFAULT, FIRST = 19, 20
local LAST = FIRST + nobs - 1
local over = {} -- ARGV index of an entity key -> its argument, when not the default
for i = LAST + 1, #ARGV, 2 do over[tonumber(ARGV[i])] = ARGV[i + 1] end

-- newer reports whether (at, id) orders after (last_at, last_id): run_at
-- first, then run_id byte by byte (Lua's < on strings follows the locale).
local function newer(at, id, last_at, last_id)
  if at ~= last_at then return at > last_at end
  if id == last_id then return false end
  for i = 1, math.min(#id, #last_id) do
    local a, b = string.byte(id, i), string.byte(last_id, i)
    if a ~= b then return a > b end
  end
  return #id > #last_id
end

local function emit(stream, typ, payload)
  if traceparent ~= '' then
    redis.call('XADD', stream, '*', 'key', scope, 'type', typ, 'payload', payload, 'traceparent', traceparent)
  else
    redis.call('XADD', stream, '*', 'key', scope, 'type', typ, 'payload', payload)
  end
end

-- run_json returns the run record's JSON.
local function run_json(status, observed, opened, closed, applied)
  local r = {run_id = run_id, source_id = source_id, provider = provider, scope_key = scope,
    started_at = started_at, run_at = run_at, status = status, observed = observed,
    opened = opened, closed = closed, applied = applied}
  if err_msg ~= '' then r.error = err_msg end
  if trace_id ~= '' then r.trace_id = trace_id end
  return cjson.encode(r)
end

local function run_record(status, observed, opened, closed, applied)
  emit(run_stream, 'avail.run', run_json(status, observed, opened, closed, applied))
end

local state_keys = {open_key, scope_hash, pend_key}
if maxk > 0 then state_keys[4] = flaps_key end

local last = redis.call('HMGET', scope_hash, 'at', 'id', 'ok', 'held', 'okms')
if last[1] and not newer(run_at_ms, run_id, tonumber(last[1]), last[2]) then
  run_record(ok and 'ok' or 'failed', nobs, 0, 0, false)
  return {0, 0, 0, 0, 0}
end
if not ok then
  redis.call('HSET', scope_hash, 'at', ARGV[2], 'id', run_id)
  for _, key in ipairs(state_keys) do redis.call('PEXPIRE', key, ttl) end
  run_record('failed', 0, 0, 0, true)
  return {1, 0, 0, 0, 0}
end

-- Commands take at most 1000 arguments of a list at a time. chunked
-- returns the elements of the replies that are arrays (HMGET's), in order.
local function chunked(cmd, key, list)
  local out = {}
  for i = 1, #list, 1000 do
    local r = redis.call(cmd, key, unpack(list, i, math.min(i + 999, #list)))
    if type(r) == 'table' then
      for _, v in ipairs(r) do out[#out + 1] = v end
    end
  end
  return out
end

-- Set diff against the raw open entities: the fields of open_key, whose
-- values say when each opened (see since below).
local baseline = not last[3]
local prev_ok = last[3] or ''
-- prev_ms: the previous OK run's run_at in ms, '' when not known. A
-- release came after it: pending opens keep it ('@<ms>') so that their
-- confirmation can tell how long the notice took at most.
local prev_ms = last[5] or ''
local obs = {} -- entity key -> its ARGV index
for i = FIRST, LAST do obs[ARGV[i]] = i end
local to_close, to_open = {}, {}
-- obs[key] turns negative once key is known to be open (or to open): one
-- table for both sets.
local function at(key)
  local i = obs[key]
  if i and i < 0 then return -i end
  return i
end
local open_keys = redis.call('HKEYS', open_key)
if #open_keys == 0 and not baseline then
  -- The open set of an earlier version: adopt its members, whose opening
  -- is unknown.
  local old = redis.call('SMEMBERS', legacy_key)
  if #old > 0 then
    local h = {}
    for _, key in ipairs(old) do
      h[#h + 1] = key
      h[#h + 1] = ''
    end
    chunked('HSET', open_key, h)
    redis.call('DEL', legacy_key)
    open_keys = old
  end
end
local matched = 0
for _, key in ipairs(open_keys) do
  local i = obs[key]
  if i then
    obs[key] = -i
    matched = matched + 1
  else
    to_close[#to_close + 1] = key
  end
end

-- The guard: a run that would close more than guard_min entities and more
-- than guard_permille/1000 of the scope's open ones (a blank or blocked
-- page answered as an empty one) is held, changing nothing but the scope's
-- last run, unless the run before it was held too: the next run confirms
-- the closes or shows them false.
if guard_min > 0 and #to_close > guard_min and #to_close * 1000 > guard_permille * #open_keys then
  if not last[4] then
    redis.call('HSET', scope_hash, 'at', ARGV[2], 'id', run_id, 'held', run_id)
    for _, key in ipairs(state_keys) do redis.call('PEXPIRE', key, ttl) end
    run_record('held', nobs, 0, #to_close, false)
    return {2, 0, 0, 0, 0}
  end
end
if last[4] then redis.call('HDEL', scope_hash, 'held') end

if matched < nobs then
  for i = FIRST, LAST do
    local key = ARGV[i]
    local j = obs[key]
    if j > 0 then
      to_open[#to_open + 1] = key
      obs[key] = -j
    end
  end
end

-- since[key] of a closing entity is "<run_at ms>\n<run_id>\n<venue name>"
-- of the run that opened it, or "" when that is not known.
local since = {}
local vals = chunked('HMGET', open_key, to_close)
for j, key in ipairs(to_close) do since[key] = vals[j] or '' end

-- Per-venue stabilization: each venue's flap record (opens, flaps), and
-- the k of each venue the run looks at, chosen from the record as it
-- stood before the run (see pervenue.go).
local vcnt, vk = {}, {}
if maxk > 0 then
  local h = redis.call('HGETALL', flaps_key)
  for i = 1, #h, 2 do
    local o, f = string.match(h[i + 1], '^(%d+):(%d+)$')
    if not o then return redis.error_reply('diff: corrupt flap record of ' .. h[i] .. ' in ' .. flaps_key) end
    vcnt[h[i]] = {tonumber(o), tonumber(f)}
  end
end
local function venue_of(key)
  local i = string.find(key, '|', 1, true)
  if not i then return '' end
  local j = string.find(key, '|', i + 1, true)
  return string.sub(key, i + 1, (j or 0) - 1)
end
local function kof(key)
  if maxk == 0 then return k end
  local v = venue_of(key)
  local kv = vk[v]
  if kv then return kv end
  local c = vcnt[v]
  if not c or c[1] < 4 then
    kv = k
  elseif c[2] * 20 <= c[1] then
    kv = 1
  else
    kv = math.min(maxk, 2 + math.floor(c[2] * (maxk - 1) / c[1]))
  end
  vk[v] = kv
  return kv
end
local vtouched = {}
local function bump(key, opens, flaps)
  if maxk == 0 then return end
  local v = venue_of(key)
  local c = vcnt[v]
  if not c then
    c = {0, 0}
    vcnt[v] = c
  end
  c[1], c[2] = c[1] + opens, c[2] + flaps
  vtouched[v] = true
end

-- Entities pending before this run: flipped back, or one run closer.
local pend = redis.call('HGETALL', pend_key)
local back, confirmed, hset, hdel, flapped = {}, {}, {}, {}, {}
for i = 1, #pend, 2 do
  local key = pend[i]
  local k = kof(key)
  local kc, count, b, after, seen = string.match(pend[i + 1], '^([oc])(%d+)(b?)@?(%d*):?(.*)$')
  if not kc then return redis.error_reply('diff: corrupt pending entry of ' .. key .. ' in ' .. pend_key) end
  if (kc == 'o') ~= (obs[key] ~= nil) then
    back[key] = true
    flapped[key] = kc == 'o'
    hdel[#hdel + 1] = key
  else
    count = tonumber(count) + 1
    if count >= k then
      confirmed[#confirmed + 1] = {key, kc == 'o' and 'open' or 'close', b == 'b', seen, after}
      hdel[#hdel + 1] = key
    else
      hset[#hset + 1] = key
      hset[#hset + 1] = kc .. count .. b .. (after ~= '' and ('@' .. after) or '') .. (seen ~= '' and (':' .. seen) or '')
    end
  end
end

-- entity rebuilds a closed entity from its key, as avail.ParseKey does.
local function entity(key)
  local p, from = {}, 1
  while true do
    local i = string.find(key, '|', from, true)
    if not i then
      p[#p + 1] = string.sub(key, from)
      break
    end
    p[#p + 1] = string.sub(key, from, i - 1)
    from = i + 1
  end
  if #p == 2 and p[1] == 'source' then
    return {key = key, kind = 'source', provider = '', venue = p[2]}
  end
  local e = {key = key, kind = 'slot', provider = p[1], venue = p[2], date = p[3], time = p[4], party_size = tonumber(p[5])}
  if e.time == '*' then
    e.kind, e.time = 'restaurant', nil
  end
  return e
end

-- argument returns the argument of the observed entity whose key is
-- ARGV[i] (its override, or the default; "=m" stands for the override of
-- the key at m) and an id that is the same for the same argument.
local function argument(i)
  local a = over[i]
  if a == nil then return ARGV[DEFAULT], DEFAULT end
  if string.byte(a, 1) == 61 then
    local m = tonumber(string.sub(a, 2))
    return over[m] or '', m
  end
  return a, i
end

-- entity_json returns the JSON of the observed entity whose key is
-- ARGV[i], from its argument: its own JSON ("{..."), or the entity its key
-- gives with the venue name and attrs of "+{...}", or none for "" (see
-- entityArgs in script.go).
local function entity_json(i)
  local a = argument(i)
  if string.byte(a, 1) == 123 then return a end
  local base = cjson.encode(entity(ARGV[i]))
  if a == '' then return base end
  -- Merge the two objects' members (their names differ): drop base's "}"
  -- and the extras' "+{".
  return string.sub(base, 1, -2) .. ',' .. string.sub(a, 3)
end

-- venue_name returns the venue name of the observed entity whose key is
-- ARGV[i], or "".
local names = {} -- argument id -> its venue name
local function venue_name(i)
  local a, id = argument(i)
  local c = string.byte(a, 1)
  if not c then return '' end
  if names[id] then return names[id] end
  local obj = cjson.decode(c == 123 and a or string.sub(a, 2))
  local name = type(obj.venue_name) == 'string' and obj.venue_name or ''
  names[id] = name
  return name
end

local out = {}
local function transition(key, kind, stable, raw, base, last_seen)
  -- The run's fields (run_id, run_at, scope_key, source_id, trace_id) are
  -- the envelope's (see the writes below).
  local t = {event_id = redis.sha1hex(run_id .. '\n' .. key .. '\n' .. kind .. '\n' .. (stable and 'stable' or 'raw')),
    kind = kind, stable = stable, notify = stable and (nfs or not base)}
  if base then t.baseline = true end
  if raw then t.raw = true end
  if last_seen ~= '' then t.last_seen = last_seen end
  local ent
  if kind == 'open' then
    ent = entity_json(at(key))
  else
    local e = entity(key)
    local ms, rid, name = string.match(since[key] or '', '^(%d+)\n([^\n]*)\n(.*)$')
    if ms and raw then
      t.open_run_id, t.opened_at_ms = rid, tonumber(ms)
    end
    if name and name ~= '' then e.venue_name = name end
    ent = cjson.encode(e)
  end
  out[#out + 1] = '{"entity":' .. ent .. ',' .. string.sub(cjson.encode(t), 2)
end

local opened, closed, s_opened, s_closed = #to_open, #to_close, 0, 0
-- notices: stable opens that notify and whose release is bounded; since:
-- the earliest bound (ms) among them.
local notices, since_ms = 0, 0
local function notice(base, after)
  if after ~= '' and (nfs or not base) then
    notices = notices + 1
    local ms = tonumber(after)
    if since_ms == 0 or ms < since_ms then since_ms = ms end
  end
end
for _, key in ipairs(to_close) do
  local k = kof(key)
  if maxk > 0 and (flapped[key] or (prev_ms ~= '' and string.match(since[key], '^(%d+)\n') == prev_ms)) then
    bump(key, 0, 1)
  end
  if back[key] then
    transition(key, 'close', false, true, false, prev_ok)
  elseif k == 1 then
    s_closed = s_closed + 1
    transition(key, 'close', true, true, false, prev_ok)
  else
    hset[#hset + 1] = key
    hset[#hset + 1] = 'c1:' .. prev_ok
    transition(key, 'close', false, true, false, prev_ok)
  end
end
for _, key in ipairs(to_open) do
  local k = kof(key)
  bump(key, 1, 0)
  if back[key] then
    transition(key, 'open', false, true, baseline, '')
  elseif k == 1 then
    s_opened = s_opened + 1
    notice(baseline, prev_ms)
    transition(key, 'open', true, true, baseline, '')
  else
    hset[#hset + 1] = key
    hset[#hset + 1] = (baseline and 'o1b' or 'o1') .. (prev_ms ~= '' and ('@' .. prev_ms) or '')
    transition(key, 'open', false, true, baseline, '')
  end
end
for _, c in ipairs(confirmed) do
  if c[2] == 'open' then
    s_opened = s_opened + 1
    notice(c[3], c[5])
  else
    s_closed = s_closed + 1
  end
  transition(c[1], c[2], true, false, c[3], c[4])
end

-- Writes.
local opened_at = ARGV[2] .. '\n' .. run_id .. '\n'
local hopen = {}
for _, key in ipairs(to_open) do
  hopen[#hopen + 1] = key
  hopen[#hopen + 1] = opened_at .. venue_name(at(key))
end
chunked('HSET', open_key, hopen)
chunked('HDEL', open_key, to_close)
chunked('HDEL', pend_key, hdel)
chunked('HSET', pend_key, hset)
local venue_ks = {}
if maxk > 0 then
  local hf = {}
  for v in pairs(vtouched) do
    local c = vcnt[v]
    while c[1] > 32 do c[1], c[2] = math.floor(c[1] / 2), math.floor(c[2] / 2) end
    hf[#hf + 1] = v
    hf[#hf + 1] = c[1] .. ':' .. c[2]
  end
  chunked('HSET', flaps_key, hf)
  for i = 1, 10 do venue_ks[i] = 0 end
  for _, kv in pairs(vk) do venue_ks[kv] = venue_ks[kv] + 1 end
end
-- reply is the script's reply to an applied OK run.
local function reply(opened, closed, s_opened, s_closed, notices, since_ms)
  local r = {1, opened, closed, s_opened, s_closed, notices, since_ms}
  for _, n in ipairs(venue_ks) do r[#r + 1] = n end
  return r
end
redis.call('HSET', scope_hash, 'at', ARGV[2], 'id', run_id, 'ok', run_at, 'okms', ARGV[2])
for _, key in ipairs(state_keys) do redis.call('PEXPIRE', key, ttl) end
-- A run that flipped something goes out on the transition stream only:
-- {"run": run record, "transitions": [...]}, an entry per at most 64
-- (avail.MaxTransitionsPerMessage) transitions and 32 KiB of them (or one larger transition), each entry
-- with the run record. Reading, acknowledging and handling an entry costs
-- its consumers about as much as a transition, and the transitions leave
-- the run's fields to the record. Other runs go out on the run stream.
if #out == 0 then
  run_record('ok', nobs, opened, closed, true)
  return reply(opened, closed, s_opened, s_closed, notices, since_ms)
end
local head = '{"run":' .. run_json('ok', nobs, opened, closed, true) .. ',"transitions":['
local from, size = 1, 0
for i, payload in ipairs(out) do
  if i > from and (i - from >= 64 or size + #payload > 32768) then
    emit(tr_stream, 'avail.transitions', head .. table.concat(out, ',', from, i - 1) .. ']}')
    from, size = i, 0
  end
  size = size + #payload + 1
end
emit(tr_stream, 'avail.transitions', head .. table.concat(out, ',', from) .. ']}')
return reply(opened, closed, s_opened, s_closed, notices, since_ms)
