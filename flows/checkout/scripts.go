package checkout

import "github.com/redis/go-redis/v9"

// Every script touches the keys of one partition (one slot) only. Amounts
// travel as decimal strings and are never turned into Lua numbers before
// HINCRBY (Lua formats large numbers as 1e+15, which HINCRBY rejects).

// adjustScript changes one integer field of an existing hash.
// KEYS[1] hash. ARGV: field, delta (signed decimal), max.
// Returns {0, new value}, {1} missing, {2} would go below 0, {3} above max.
var adjustScript = redis.NewScript(`
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v then return {1} end
local n = tonumber(v) + tonumber(ARGV[2])
if n < 0 then return {2} end
if n > tonumber(ARGV[3]) then return {3} end
return {0, redis.call('HINCRBY', KEYS[1], ARGV[1], ARGV[2])}`)

// addLineScript appends an item line to an order.
// KEYS[1] order. ARGV: item id, quantity, line cost, max lines.
// Returns {0, total} or {1} missing, {2} paid, {3} checkout in progress,
// {4} too many lines.
var addLineScript = redis.NewScript(`
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
return {0, redis.call('HINCRBY', KEYS[1], 'total_cost', ARGV[3])}`)

// beginScript starts an attempt: it numbers it, records its saga and
// appends its intent (TypeBegin) to the order's outcomes stream, in one
// step, so an attempt is either not started or certain to be dispatched.
// KEYS: order, saga, outcomes stream. ARGV: 1 order id, 2 expected tr,
// 3 expected ver, 4 new tr, 5 begin payload, 6 traceparent, 7 now ms,
// 8 parts (comma list), 9 saga ttl ms, 10 user id, 11 total cost, then
// pairs (part, command JSON).
// Returns {status, tr}: started, paid, inflight (an attempt is running),
// missing, or retry (the order changed since it was read).
var beginScript = redis.NewScript(`
local o = KEYS[1]
if redis.call('EXISTS', o) == 0 then return {'missing', '0'} end
local f = redis.call('HMGET', o, 'paid', 'status', 'tr', 'ver')
local tr = f[3] or '0'
if f[1] == '1' then return {'paid', tr} end
if f[2] == 'pending' or f[2] == 'compensating' then return {'inflight', tr} end
if tr ~= ARGV[2] or (f[4] or '0') ~= ARGV[3] then return {'retry', tr} end
redis.call('HSET', o, 'tr', ARGV[4], 'status', 'pending')
redis.call('HSET', KEYS[2], 'status', 'pending', 'parts', ARGV[8], 'started_ms', ARGV[7],
  'user', ARGV[10], 'total', ARGV[11], 'tp', ARGV[6])
for i = 12, #ARGV, 2 do redis.call('HSET', KEYS[2], 'cmd:' .. ARGV[i], ARGV[i + 1]) end
redis.call('PEXPIRE', KEYS[2], ARGV[9])
if ARGV[6] ~= '' then
  redis.call('XADD', KEYS[3], '*', 'key', ARGV[1], 'type', 'checkout.begin', 'payload', ARGV[5], 'traceparent', ARGV[6])
else
  redis.call('XADD', KEYS[3], '*', 'key', ARGV[1], 'type', 'checkout.begin', 'payload', ARGV[5])
end
return {'started', ARGV[4]}`)

// effectScript applies a stock or payment command exactly once per ledger
// key (order, tr_num, is_rollback), checking and recording the key with
// the effect. A forward command changes every hash or none: all are checked
// before any is written. A compensation undoes the forward effect only if it
// was applied ("ok"); if the forward command has not come yet, it records
// it as "cancelled" so that it never applies.
// KEYS: 1 forward ledger key, 2 rollback ledger key, 3.. hashes.
// ARGV: 1 '0' forward / '1' rollback, 2 ledger ttl ms, 3 field ('stock' or
// 'credit'), 4 noun ('item' or 'user'), then per hash: id, amount.
// Returns the recorded result: "ok", "fail:<reason>", "noop" or
// "cancelled" (for a late forward command).
var effectScript = redis.NewScript(`
local ttl, field, noun = ARGV[2], ARGV[3], ARGV[4]
if ARGV[1] == '0' then
  local prev = redis.call('GET', KEYS[1])
  if prev then return prev end
  for i = 3, #KEYS do
    local id, amt = ARGV[2 * i - 1], ARGV[2 * i]
    local v = redis.call('HGET', KEYS[i], field)
    local r = nil
    if not v then r = 'fail:' .. noun .. ' ' .. id .. ' not found'
    elseif tonumber(v) < tonumber(amt) then r = 'fail:insufficient ' .. field .. ' for ' .. noun .. ' ' .. id end
    if r then
      redis.call('SET', KEYS[1], r, 'PX', ttl)
      return r
    end
  end
  for i = 3, #KEYS do redis.call('HINCRBY', KEYS[i], field, '-' .. ARGV[2 * i]) end
  redis.call('SET', KEYS[1], 'ok', 'PX', ttl)
  return 'ok'
end
local prev = redis.call('GET', KEYS[2])
if prev then return prev end
local fwd = redis.call('GET', KEYS[1])
local r = 'noop'
if not fwd then
  redis.call('SET', KEYS[1], 'cancelled', 'PX', ttl)
elseif fwd == 'ok' then
  for i = 3, #KEYS do redis.call('HINCRBY', KEYS[i], field, ARGV[2 * i]) end
  r = 'ok'
end
redis.call('SET', KEYS[2], r, 'PX', ttl)
return r`)

// outcomeScript records a stage's outcome in the attempt's saga and
// decides. Outcomes are recorded once per part (HSETNX), so a redelivered
// outcome changes nothing. Once every part has answered: all ok → the
// order is paid and the attempt succeeded; otherwise the attempt
// compensates every part that succeeded, and fails once each has confirmed
// its compensation. The transition to a final status appends the saga
// record to the sagas stream, in the same step.
// KEYS: order, saga, sagas stream. ARGV: 1 order id, 2 tr, 3 part,
// 4 '0' forward / '1' rollback, 5 result, 6 now ms, 7 saga ttl ms.
// Returns {'pending'}, {'unknown'} (no such saga), {status, 'new'|'old',
// reason} for a final status (new when this call decided it), or
// {'compensating', 'new'|'old', part, command JSON, ...} listing the
// compensations still unconfirmed (new when this call decided to
// compensate).
var outcomeScript = redis.NewScript(`
local saga = KEYS[2]
local st = redis.call('HGET', saga, 'status')
if not st then return {'unknown'} end
if ARGV[4] == '0' then
  redis.call('HSETNX', saga, 'r:' .. ARGV[3], ARGV[5])
else
  redis.call('HSETNX', saga, 'c:' .. ARGV[3], ARGV[5])
end
local parts = {}
for p in string.gmatch(redis.call('HGET', saga, 'parts') or '', '[^,]+') do parts[#parts + 1] = p end
local function finish(status, reason, comp)
  local f = redis.call('HMGET', saga, 'started_ms', 'decided_ms', 'user', 'total', 'tp')
  redis.call('HSET', saga, 'status', status, 'reason', reason, 'finished_ms', ARGV[6])
  if redis.call('HGET', KEYS[1], 'tr') == ARGV[2] then
    if status == 'succeeded' then
      redis.call('HSET', KEYS[1], 'status', status, 'paid', '1')
    else
      redis.call('HSET', KEYS[1], 'status', status)
    end
  end
  local tp = f[5] or ''
  local rec = '{"order_id":"' .. ARGV[1] .. '","tr_num":' .. ARGV[2] .. ',"user_id":"' .. (f[3] or '') ..
    '","status":"' .. status .. '","reason":"' .. reason .. '","total_cost":' .. (f[4] or '0') ..
    ',"parts":' .. #parts .. ',"compensated":' .. comp .. ',"started_ms":' .. (f[1] or '0') ..
    ',"decided_ms":' .. (f[2] or ARGV[6]) .. ',"finished_ms":' .. ARGV[6] .. ',"traceparent":"' .. tp .. '"}'
  if tp ~= '' then
    redis.call('XADD', KEYS[3], '*', 'key', ARGV[1], 'type', 'checkout.saga', 'payload', rec, 'traceparent', tp)
  else
    redis.call('XADD', KEYS[3], '*', 'key', ARGV[1], 'type', 'checkout.saga', 'payload', rec)
  end
  redis.call('PEXPIRE', saga, ARGV[7])
end
local fresh = 'old'
if st == 'pending' then
  local reason = nil
  for _, p in ipairs(parts) do
    local r = redis.call('HGET', saga, 'r:' .. p)
    if not r then return {'pending'} end
    if r ~= 'ok' and not reason then
      if string.sub(r, 1, 5) == 'fail:' then reason = string.sub(r, 6) else reason = r end
    end
  end
  redis.call('HSET', saga, 'decided_ms', ARGV[6])
  if not reason then
    finish('succeeded', '', 0)
    return {'succeeded', 'new', ''}
  end
  redis.call('HSET', saga, 'status', 'compensating', 'reason', reason)
  if redis.call('HGET', KEYS[1], 'tr') == ARGV[2] then redis.call('HSET', KEYS[1], 'status', 'compensating') end
  st = 'compensating'
  fresh = 'new'
end
if st == 'compensating' then
  local out = {'compensating', fresh}
  local n = 0
  for _, p in ipairs(parts) do
    if redis.call('HGET', saga, 'r:' .. p) == 'ok' then
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
return {st, 'old', redis.call('HGET', saga, 'reason') or ''}`)
