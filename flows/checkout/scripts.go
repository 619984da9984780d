package checkout

import "github.com/dropstream/dropstream/internal/script"

// Every script touches the keys of one partition (one slot) only. Amounts
// travel as decimal strings and are never turned into Lua numbers before
// HINCRBY (Lua formats large numbers as 1e+15, which HINCRBY rejects).
// Flags are Go bools, which go-redis sends as 1 or 0.

// countersLua starts the conservation counters of an item ("stocked",
// "sold") and a user ("funded", "charged"). Scripts change them with the
// amount, so stocked = stock + sold and funded = credit + charged (see
// Flow.Conservation).
const countersLua = `
local function counters(key, field)
  local prov, sales = 'stocked', 'sold'
  if field == 'credit' then prov, sales = 'funded', 'charged' end
  if redis.call('HEXISTS', key, prov) == 0 then
    local f = redis.call('HMGET', key, field, sales)
    if f[1] then
      redis.call('HSET', key, prov, f[1])
      if f[2] then redis.call('HINCRBY', key, prov, f[2]) end
    end
  end
  return prov, sales
end
`

// adjustScript changes a hash's integer field and its counter ("stocked",
// "funded"), once per call key: a retry answers the recorded value. KEYS:
// hash, call key. ARGV: field, signed decimal delta, max, call key ttl ms.
// Returns {0, new value}, {1} missing, {2} below 0, {3} above max.
var adjustScript = script.New(countersLua + `
local done = redis.call('GET', KEYS[2])
if done then return {0, done} end
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v then return {1} end
local n = tonumber(v) + tonumber(ARGV[2])
if n < 0 then return {2} end
if n > tonumber(ARGV[3]) then return {3} end
local prov = counters(KEYS[1], ARGV[1])
redis.call('HINCRBY', KEYS[1], prov, ARGV[2])
redis.call('HINCRBY', KEYS[1], ARGV[1], ARGV[2])
local now = redis.call('HGET', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], now, 'PX', ARGV[4])
return {0, now}`)

// addLineScript appends an item line to an order, once per call key (like
// adjustScript). KEYS: order, call key. ARGV: item id, quantity, line cost,
// max lines, call key ttl ms. Returns {0, total}, {1} missing, {2} paid,
// {3} checkout running, {4} too many lines.
var addLineScript = script.New(`
local done = redis.call('GET', KEYS[2])
if done then return {0, done} end
local f = redis.call('HMGET', KEYS[1], 'user_id', 'paid', 'status', 'items')
if not f[1] then return {1} end
if f[2] == '1' then return {2} end
if f[3] == 'pending' or f[3] == 'compensating' then return {3} end
local items = f[4] or ''
local n = 0
for _ in string.gmatch(items, '[^,]+') do n = n + 1 end
if n >= tonumber(ARGV[4]) then return {4} end
local line = ARGV[1] .. ':' .. ARGV[2]
if items ~= '' then line = ',' .. line end
redis.call('HSET', KEYS[1], 'items', items .. line)
redis.call('HINCRBY', KEYS[1], 'ver', 1)
redis.call('HINCRBY', KEYS[1], 'total_cost', ARGV[3])
local total = redis.call('HGET', KEYS[1], 'total_cost')
redis.call('SET', KEYS[2], total, 'PX', ARGV[5])
return {0, total}`)

// beginScript numbers an attempt, records its saga with each part's
// command and indexes it as open. KEYS: order, saga, open index. ARGV: 1
// order id, 2 expected tr, 3 expected ver, 4 new tr, 5 traceparent, 6 now
// ms, 7 parts (comma list), 8 saga ttl ms, 9 user id, 10 total cost, 11
// nonce, then (part, command JSON) pairs. Returns {status, tr}: started,
// paid, inflight, missing, or retry (the order changed since it was read).
var beginScript = script.New(`
local o = KEYS[1]
local f = redis.call('HMGET', o, 'paid', 'status', 'tr', 'ver', 'user_id')
if not f[5] then return {'missing', '0'} end
local tr = f[3] or '0'
if f[1] == '1' then return {'paid', tr} end
if f[2] == 'pending' or f[2] == 'compensating' then return {'inflight', tr} end
if tr ~= ARGV[2] or (f[4] or '0') ~= ARGV[3] then return {'retry', tr} end
redis.call('HSET', o, 'tr', ARGV[4], 'status', 'pending')
local h = {'status', 'pending', 'parts', ARGV[7], 'answered', '0', 'started_ms', ARGV[6],
  'user', ARGV[9], 'total', ARGV[10], 'tp', ARGV[5], 'nonce', ARGV[11]}
for i = 12, #ARGV, 2 do
  h[#h + 1] = 'cmd:' .. ARGV[i]
  h[#h + 1] = ARGV[i + 1]
end
redis.call('HSET', KEYS[2], unpack(h))
redis.call('PEXPIRE', KEYS[2], ARGV[8])
redis.call('ZADD', KEYS[3], ARGV[6], ARGV[1] .. '|' .. ARGV[4])
return {'started', ARGV[4]}`)

// effectScript applies a batch of one partition's stock or payment
// commands, each once per ledger key. A forward command changes all its
// hashes or none; a compensation undoes only an "ok" forward effect, else
// records "cancelled" so the forward command never applies. KEYS: per
// command its forward and rollback ledger keys, then its hashes. ARGV:
// ledger ttl ms, field ('stock'/'credit'), noun ('item'/'user'), then per
// command '0' forward / '1' rollback, n and n (id, amount) pairs. Returns
// each result: "ok", "fail:<reason>", "noop" or "cancelled".
var effectScript = script.New(countersLua + `
local ttl, field, noun = ARGV[1], ARGV[2], ARGV[3]
local function forward(k, a, n)
  local prev = redis.call('GET', KEYS[k])
  if prev then return prev end
  for i = 0, n - 1 do
    local id, amt = ARGV[a + 2 * i], ARGV[a + 2 * i + 1]
    local v = redis.call('HGET', KEYS[k + 2 + i], field)
    local r = nil
    if not v then r = 'fail:' .. noun .. ' ' .. id .. ' not found'
    elseif tonumber(v) < tonumber(amt) then r = 'fail:insufficient ' .. field .. ' for ' .. noun .. ' ' .. id end
    if r then
      redis.call('SET', KEYS[k], r, 'PX', ttl)
      return r
    end
  end
  for i = 0, n - 1 do
    -- A zero amount (an order of total 0) changes nothing; Redis would
    -- refuse "-0" as an increment.
    local amt = ARGV[a + 2 * i + 1]
    if tonumber(amt) ~= 0 then
      local _, sales = counters(KEYS[k + 2 + i], field)
      redis.call('HINCRBY', KEYS[k + 2 + i], field, '-' .. amt)
      redis.call('HINCRBY', KEYS[k + 2 + i], sales, amt)
    end
  end
  redis.call('SET', KEYS[k], 'ok', 'PX', ttl)
  return 'ok'
end
local function rollback(k, a, n)
  local prev = redis.call('GET', KEYS[k + 1])
  if prev then return prev end
  local fwd = redis.call('GET', KEYS[k])
  local r = 'noop'
  if not fwd then
    redis.call('SET', KEYS[k], 'cancelled', 'PX', ttl)
  elseif fwd == 'ok' then
    for i = 0, n - 1 do
      local amt = ARGV[a + 2 * i + 1]
      if tonumber(amt) ~= 0 then
        local _, sales = counters(KEYS[k + 2 + i], field)
        redis.call('HINCRBY', KEYS[k + 2 + i], field, amt)
        redis.call('HINCRBY', KEYS[k + 2 + i], sales, '-' .. amt)
      end
    end
    r = 'ok'
  end
  redis.call('SET', KEYS[k + 1], r, 'PX', ttl)
  return r
end
local out = {}
local k, a = 1, 4
while a <= #ARGV do
  local rb, n = ARGV[a], tonumber(ARGV[a + 1])
  if rb == '0' then out[#out + 1] = forward(k, a + 2, n) else out[#out + 1] = rollback(k, a + 2, n) end
  k = k + 2 + n
  a = a + 2 + 2 * n
end
return out`)

// outcomeScript records a batch of one partition's outcomes in their sagas
// (HSETNX per part, timed in "rt:<part>" or "ct:<part>") and decides: all
// parts ok pays the order, else the attempt compensates each part that
// succeeded, was abandoned or cancelled, and fails once all are confirmed.
// The final step appends the saga record, leaves the open index and
// publishes "<order>|<tr>|<status>|<reason>" on the done channel.
// KEYS: sagas stream, open index, then per outcome order and saga. ARGV:
// now ms, saga ttl ms, done channel, then per outcome order id, tr, nonce,
// part, '0' forward / '1' rollback, result. Returns per outcome {'pending'},
// {'unknown'} (no saga kept), {'stale'} (never begun here: not recorded),
// {status, 'new'|'old', reason} once final, or {'compensating', 'new'|'old',
// then (part, command JSON) per unconfirmed compensation}; 'new': decided now.
var outcomeScript = script.New(`
local now, ttl, channel = ARGV[1], ARGV[2], ARGV[3]
local function comp(r) return r == 'ok' or r == 'abandoned' or r == 'cancelled' end
local function record(okey, saga, id, tr, nonce, part, rb, result)
  local h = redis.call('HMGET', saga, 'status', 'parts', 'answered', 'nonce')
  local st = h[1]
  if not st then
    local otr = redis.call('HGET', okey, 'tr')
    if not otr or tonumber(otr) < tonumber(tr) then return {'stale'} end
    return {'unknown'}
  end
  if (h[4] or '') ~= nonce then return {'stale'} end
  local parts = {}
  for p in string.gmatch(h[2] or '', '[^,]+') do parts[#parts + 1] = p end
  if rb == '0' then
    local fresh = redis.call('HSETNX', saga, 'r:' .. part, result)
    if fresh == 1 then redis.call('HSET', saga, 'rt:' .. part, now) end
    if st == 'pending' and h[3] then
      local n = tonumber(h[3])
      if fresh == 1 then n = redis.call('HINCRBY', saga, 'answered', 1) end
      if n < #parts then return {'pending'} end
    end
  elseif redis.call('HSETNX', saga, 'c:' .. part, result) == 1 then
    redis.call('HSET', saga, 'ct:' .. part, now)
  end
  local function finish(status, reason, ncomp)
    local f = redis.call('HMGET', saga, 'started_ms', 'decided_ms', 'user', 'total', 'tp')
    redis.call('HSET', saga, 'status', status, 'reason', reason, 'finished_ms', now)
    if redis.call('HGET', okey, 'tr') == tr then
      if status == 'succeeded' then
        redis.call('HSET', okey, 'status', status, 'paid', '1')
      else
        redis.call('HSET', okey, 'status', status)
      end
    end
    local tp = f[5] or ''
    local steps = {}
    for _, p in ipairs(parts) do
      local r = redis.call('HMGET', saga, 'r:' .. p, 'c:' .. p)
      local step = '{"part":"' .. p .. '","result":"' .. (r[1] or '') .. '"'
      if r[2] then step = step .. ',"undo":"' .. r[2] .. '"' end
      steps[#steps + 1] = step .. '}'
    end
    local rec = '{"order_id":"' .. id .. '","tr_num":' .. tr .. ',"user_id":"' .. (f[3] or '') ..
      '","status":"' .. status .. '","reason":"' .. reason .. '","total_cost":' .. (f[4] or '0') ..
      ',"parts":' .. #parts .. ',"compensated":' .. ncomp .. ',"started_ms":' .. (f[1] or '0') ..
      ',"decided_ms":' .. (f[2] or now) .. ',"finished_ms":' .. now .. ',"traceparent":"' .. tp ..
      '","steps":[' .. table.concat(steps, ',') .. ']}'
    if tp ~= '' then
      redis.call('XADD', KEYS[1], '*', 'key', id, 'type', 'checkout.saga', 'payload', rec, 'traceparent', tp)
    else
      redis.call('XADD', KEYS[1], '*', 'key', id, 'type', 'checkout.saga', 'payload', rec)
    end
    redis.call('PEXPIRE', saga, ttl)
    redis.call('ZREM', KEYS[2], id .. '|' .. tr)
    redis.call('PUBLISH', channel, id .. '|' .. tr .. '|' .. status .. '|' .. reason)
  end
  local fresh = 'old'
  if st == 'pending' then
    local reason = nil
    for _, p in ipairs(parts) do
      local r = redis.call('HGET', saga, 'r:' .. p)
      if not r then return {'pending'} end
      if r ~= 'ok' and not reason then
        if string.sub(r, 1, 5) == 'fail:' then reason = string.sub(r, 6)
        elseif r == 'abandoned' then reason = 'no answer from ' .. p .. ' in time'
        elseif r == 'cancelled' then reason = 'cancelled by an operator'
        else reason = r end
      end
    end
    redis.call('HSET', saga, 'decided_ms', now)
    if not reason then
      finish('succeeded', '', 0)
      return {'succeeded', 'new', ''}
    end
    redis.call('HSET', saga, 'status', 'compensating', 'reason', reason)
    if redis.call('HGET', okey, 'tr') == tr then redis.call('HSET', okey, 'status', 'compensating') end
    st = 'compensating'
    fresh = 'new'
  end
  if st == 'compensating' then
    local out = {'compensating', fresh}
    local n = 0
    for _, p in ipairs(parts) do
      if comp(redis.call('HGET', saga, 'r:' .. p)) then
        n = n + 1
        if not redis.call('HGET', saga, 'c:' .. p) then
          out[#out + 1] = p
          out[#out + 1] = redis.call('HGET', saga, 'cmd:' .. p)
        end
      end
    end
    if #out == 2 then
      local reason = redis.call('HGET', saga, 'reason') or ''
      finish('failed', reason, n)
      return {'failed', 'new', reason}
    end
    return out
  end
  return {st, 'old', redis.call('HGET', saga, 'reason') or ''}
end
local out = {}
local k, a = 3, 4
while a + 5 <= #ARGV do
  out[#out + 1] = record(KEYS[k], KEYS[k + 1], ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5])
  k = k + 2
  a = a + 6
end
return out`)
