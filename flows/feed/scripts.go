package feed

import "github.com/redis/go-redis/v9"

// luaHistory appends an item event to the history stream (ARGV of the
// caller: hist, tp, feed). Event ids are deterministic, so redelivered
// events collapse in ClickHouse.
const luaHistory = `
local function history(hist, tp, feed, now, kind, iid, guid, hash, sub, within)
  local id = feed .. ':' .. iid .. ':' .. kind
  if kind == 'edited' then id = id .. ':' .. hash end
  if sub ~= '' then id = id .. ':' .. sub .. ':' .. within end
  local p = cjson.encode({event_id = id, feed_id = feed, iid = iid, guid = guid or '', kind = kind,
    at_ms = tostring(now), hash = hash or '', subscribable = sub, within = within})
  if tp ~= '' then
    redis.call('XADD', hist, '*', 'key', feed, 'type', 'feed.item_event', 'payload', p, 'traceparent', tp)
  else
    redis.call('XADD', hist, '*', 'key', feed, 'type', 'feed.item_event', 'payload', p)
  end
end
`

// luaRelease releases an item from one collection (ARGV of the caller:
// prefix, hist, tp, feed, now): an assigned item no collection waits for
// any more is Cleared, its content dropped, its guid and hash kept.
// delivered records the delivery of the item first.
const luaRelease = `
local function release(prefix, hist, tp, feed, now, iid, delivered, name, within)
  local k = prefix .. 'item:' .. iid
  local h = redis.call('HMGET', k, 'hash', 'state')
  if not h[2] then return end
  local guid = redis.call('HGET', prefix .. 'guids', iid)
  if delivered then history(hist, tp, feed, now, 'delivered', iid, guid, h[1], name, within) end
  local refs = redis.call('HINCRBY', k, 'refs', -1)
  if refs <= 0 and h[2] == 'a' then
    redis.call('HSET', k, 'state', 'c')
    redis.call('HDEL', prefix .. 'content', iid)
    history(hist, tp, feed, now, 'cleared', iid, guid, h[1], '', '')
  end
end
`

// observeScript applies one successful poll (or push) to a feed's items.
// KEYS[1] meta. ARGV: prefix, now ms, include_existing (0|1), hist, tp,
// feed, keep (the arrivals kept), then (iid, guid, hash, content, order,
// fingerprint) per item; order is the item's score in the items and
// unassigned sets: first seen (ms) × 1000 plus its position in the
// document, so items are assigned in first-seen, then document, order.
//
// A new item whose fingerprint (canonical link and content, Fingerprint)
// names another item is Held: a duplicate under a rotated guid, never
// sent, counted in meta's held. A document that brings a new Unassigned
// item records its time in the feed's arrivals (newest first, keep of
// them), which the adaptive interval reads.
// Returns {-1,0,0,0} for a poll older than the newest applied, else
// {0, new, edited, held}.
var observeScript = redis.NewScript(luaHistory + `
local prefix, now, include = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local hist, tp, feed, keep = ARGV[4], ARGV[5], ARGV[6], tonumber(ARGV[7])
local meta = KEYS[1]
local last = tonumber(redis.call('HGET', meta, 'last') or '-1')
if now < last then return {-1, 0, 0, 0} end
local first = redis.call('HGET', meta, 'first')
if not first then
  redis.call('HSET', meta, 'first', ARGV[2])
  first = ARGV[2]
end
local initial = (tonumber(first) == now) and include == '0'
redis.call('HSET', meta, 'last', ARGV[2])
local new, edited, held, arrived = 0, 0, 0, false
for i = 8, #ARGV, 6 do
  local iid, guid, hash, content, order, fp = ARGV[i], ARGV[i+1], ARGV[i+2], ARGV[i+3], ARGV[i+4], ARGV[i+5]
  local k = prefix .. 'item:' .. iid
  local st = redis.call('HGET', k, 'state')
  if not st then
    local state = 'u'
    if initial then state = 'x' end
    if fp ~= '' then
      local other = redis.call('HGET', prefix .. 'prints', fp)
      if other and other ~= iid then
        state = 'h'
      else
        redis.call('HSET', prefix .. 'prints', fp, iid)
      end
    end
    redis.call('HSET', k, 'hash', hash, 'first', ARGV[2], 'checked', ARGV[2], 'stable', ARGV[2], 'state', state, 'refs', '0')
    redis.call('HSET', prefix .. 'guids', iid, guid)
    if state == 'u' then redis.call('HSET', prefix .. 'content', iid, content) end
    redis.call('ZADD', prefix .. 'items', order, iid)
    if state == 'u' then
      redis.call('ZADD', prefix .. 'unassigned', order, iid)
      history(hist, tp, feed, now, 'first_seen', iid, guid, hash, '', '')
      arrived = true
      new = new + 1
    elseif state == 'h' then
      redis.call('HINCRBY', meta, 'held', 1)
      history(hist, tp, feed, now, 'held', iid, guid, hash, '', '')
      held = held + 1
    else
      history(hist, tp, feed, now, 'excluded', iid, guid, hash, '', '')
      new = new + 1
    end
  else
    redis.call('HSET', k, 'checked', ARGV[2])
    if st == 'u' and redis.call('HGET', k, 'hash') ~= hash then
      redis.call('HSET', k, 'hash', hash, 'stable', ARGV[2])
      redis.call('HSET', prefix .. 'content', iid, content)
      history(hist, tp, feed, now, 'edited', iid, guid, hash, '', '')
      edited = edited + 1
    end
  end
end
if arrived then
  redis.call('LPUSH', prefix .. 'arrivals', ARGV[2])
  redis.call('LTRIM', prefix .. 'arrivals', 0, keep - 1)
end
return {0, new, edited, held}`)

// assignScript assigns every assignable item of a feed to all the
// collections of the feed's subscribables, each item in this one atomic
// step, then completes the collections that are due and forwards each to
// the collections stream in the same step. Subscribables marked dropped
// (dropScript) are skipped.
//
// An item never joins a completed collection: when the collection it is
// due for was completed and still waits for its delivery (a window cut at
// its size cap, a subscribable defined again under its old name), it
// opens the next collection of the same window, "<within>+2", "+3"...,
// which the window's later items join (meta's cur:<name> names it). A
// daily or weekly collection is completed early when it holds collcap
// items, so no collection (nor its message) grows without bound.
//
// A poll that saw the feed (seen: 1), answered 200 or 304, records its time
// in meta's seen: the items of the last document applied (checked = meta's
// last) were checked then too (see Flow.Items).
// KEYS[1] meta. ARGV: prefix, now, min ms, await ms, max ms, colls, hist,
// tp, feed, limit, collcap, seen (0|1), then (name, kind, within, due, n)
// per subscribable. Returns {assigned, completed}.
var assignScript = redis.NewScript(luaHistory + `
local prefix, now = ARGV[1], tonumber(ARGV[2])
local mind, await, maxd = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local colls, hist, tp, feed, limit = ARGV[6], ARGV[7], ARGV[8], ARGV[9], tonumber(ARGV[10])
local collcap = tonumber(ARGV[11])
if ARGV[12] == '1' and now > tonumber(redis.call('HGET', KEYS[1], 'seen') or '0') then
  redis.call('HSET', KEYS[1], 'seen', ARGV[2])
end
local subs = {}
for i = 13, #ARGV, 5 do
  -- a subscribable being deleted (dropScript) takes no more items, even
  -- when the caller read the definitions before it went
  if redis.call('HEXISTS', prefix .. 'dropped', ARGV[i]) == 0 then
    subs[#subs + 1] = {name = ARGV[i], kind = ARGV[i+1], within = ARGV[i+2], due = ARGV[i+3], n = tonumber(ARGV[i+4])}
  end
end
local completed = 0
local function complete(name, within)
  local ck = prefix .. 'coll:' .. name .. ':' .. within
  local c = redis.call('HMGET', ck, 'opened', 'completed')
  redis.call('ZREM', prefix .. 'open', name .. '\0' .. within)
  if not c[1] or c[2] then return end
  redis.call('HSET', ck, 'completed', ARGV[2])
  redis.call('ZADD', prefix .. 'completed', ARGV[2], name .. '\0' .. within)
  local iids = redis.call('LRANGE', ck .. ':i', 0, -1)
  local parts = {}
  for _, iid in ipairs(iids) do
    local content = redis.call('HGET', prefix .. 'content', iid)
    if content then parts[#parts + 1] = content end
  end
  local p = '{"feed_id":"' .. feed .. '","subscribable":"' .. name .. '","within":"' .. within ..
    '","opened_ms":' .. c[1] .. ',"completed_ms":' .. ARGV[2] .. ',"iids":["' .. table.concat(iids, '","') ..
    '"],"items":[' .. table.concat(parts, ',') .. ']}'
  if tp ~= '' then
    redis.call('XADD', colls, '*', 'key', feed, 'type', 'feed.collection', 'payload', p, 'traceparent', tp)
  else
    redis.call('XADD', colls, '*', 'key', feed, 'type', 'feed.collection', 'payload', p)
  end
  completed = completed + 1
end
-- join returns the collection of name that an item due for the
-- collection base joins: the one open for base (meta's cur:<name>), else a
-- new one under the first of base, base+2, base+3... that no collection
-- holds. An each-item collection is always new (its base is the item).
local function join(name, kind, base, due)
  if kind ~= 'each' then
    local w = redis.call('HGET', KEYS[1], 'cur:' .. name)
    if w and (w == base or string.sub(w, 1, #base + 1) == base .. '+') then
      local ck = prefix .. 'coll:' .. name .. ':' .. w
      local c = redis.call('HMGET', ck, 'opened', 'completed')
      if c[1] and not c[2] then return w, ck end
    end
  end
  local w, k = base, 1
  while redis.call('EXISTS', prefix .. 'coll:' .. name .. ':' .. w) == 1 do
    k = k + 1
    w = base .. '+' .. k
  end
  local ck = prefix .. 'coll:' .. name .. ':' .. w
  redis.call('HSET', ck, 'opened', ARGV[2], 'due', due)
  redis.call('ZADD', prefix .. 'open', due, name .. '\0' .. w)
  if kind ~= 'each' then redis.call('HSET', KEYS[1], 'cur:' .. name, w) end
  return w, ck
end
local assigned = 0
local cands = redis.call('ZRANGE', prefix .. 'unassigned', 0, limit - 1)
for _, iid in ipairs(cands) do
  local k = prefix .. 'item:' .. iid
  local h = redis.call('HMGET', k, 'first', 'stable', 'state', 'hash')
  local first, stable = tonumber(h[1]), tonumber(h[2])
  local guid = redis.call('HGET', prefix .. 'guids', iid)
  if h[3] ~= 'u' then
    redis.call('ZREM', prefix .. 'unassigned', iid)
  elseif first and ((now - stable >= await and now - first >= mind) or now - first >= maxd) then
    for _, s in ipairs(subs) do
      local base, due = s.within, s.due
      if s.kind == 'each' then
        base, due = iid, ARGV[2]
      elseif s.kind == 'every_n' then
        base = redis.call('GET', prefix .. 'seq:' .. s.name) or '1'
      end
      local within, ck = join(s.name, s.kind, base, due)
      local n = redis.call('RPUSH', ck .. ':i', iid)
      if s.kind == 'each' then
        complete(s.name, within)
      elseif s.kind == 'every_n' then
        if n >= s.n then
          redis.call('SET', prefix .. 'seq:' .. s.name, tostring(tonumber(base) + 1))
          complete(s.name, within)
        end
      elseif n >= collcap then
        complete(s.name, within)
      end
    end
    redis.call('ZREM', prefix .. 'unassigned', iid)
    redis.call('HSET', k, 'state', 'a', 'refs', #subs)
    history(hist, tp, feed, now, 'assigned', iid, guid, h[4], '', '')
    if #subs == 0 then
      redis.call('HSET', k, 'state', 'c')
      redis.call('HDEL', prefix .. 'content', iid)
      history(hist, tp, feed, now, 'cleared', iid, guid, h[4], '', '')
    end
    assigned = assigned + 1
  end
end
local due = redis.call('ZRANGEBYSCORE', prefix .. 'open', '-inf', ARGV[2])
for _, m in ipairs(due) do
  local sep = string.find(m, '\0', 1, true)
  complete(string.sub(m, 1, sep - 1), string.sub(m, sep + 1))
end
return {assigned, completed}`)

// cleanupScript runs once a completed collection was delivered: it records
// the delivery of each item, releases the item (an item no collection
// waits for any more is Cleared: its content dropped, its guid and hash
// kept) and deletes the collection. A second run finds nothing to do.
// KEYS[1] meta. ARGV: prefix, now, hist, tp, feed, name, within.
var cleanupScript = redis.NewScript(luaHistory + luaRelease + `
local prefix, now, hist, tp, feed, name, within = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local ck = prefix .. 'coll:' .. name .. ':' .. within
if redis.call('EXISTS', ck) == 0 then return 0 end
local iids = redis.call('LRANGE', ck .. ':i', 0, -1)
for _, iid in ipairs(iids) do
  release(prefix, hist, tp, feed, now, iid, true, name, within)
end
redis.call('DEL', ck, ck .. ':i')
redis.call('ZREM', prefix .. 'open', name .. '\0' .. within)
redis.call('ZREM', prefix .. 'completed', name .. '\0' .. within)
return #iids`)

// dropScript runs when a subscribable is deleted: it marks the name
// dropped in the feed's partition (assignScript then skips it, also when
// its caller read the definitions earlier), releases the items of its open
// collections (an every-n collection short of n, a daily or weekly window
// not yet due) without delivering them, deletes those collections and
// restarts its every-n numbering. A completed collection still on its way
// to delivery is left to cleanupScript. Running it again finds nothing.
// KEYS[1] meta. ARGV: prefix, now, hist, tp, feed, name. Returns the
// items released.
var dropScript = redis.NewScript(luaHistory + luaRelease + `
local prefix, now, hist, tp, feed, name = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4], ARGV[5], ARGV[6]
redis.call('HSET', prefix .. 'dropped', name, '1')
redis.call('DEL', prefix .. 'seq:' .. name)
redis.call('HDEL', KEYS[1], 'cur:' .. name)
local released = 0
for _, m in ipairs(redis.call('ZRANGE', prefix .. 'open', 0, -1)) do
  local sep = string.find(m, '\0', 1, true)
  if string.sub(m, 1, sep - 1) == name then
    local within = string.sub(m, sep + 1)
    local ck = prefix .. 'coll:' .. name .. ':' .. within
    local iids = redis.call('LRANGE', ck .. ':i', 0, -1)
    for _, iid in ipairs(iids) do
      release(prefix, hist, tp, feed, now, iid, false, name, within)
    end
    released = released + #iids
    redis.call('DEL', ck, ck .. ':i')
    redis.call('ZREM', prefix .. 'open', m)
  end
end
return released`)

// excludeScript marks an Unassigned item Excluded. KEYS[1] meta. ARGV:
// prefix, now, hist, tp, feed, iid. Returns the state before.
var excludeScript = redis.NewScript(luaHistory + `
local prefix, now, hist, tp, feed, iid = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local k = prefix .. 'item:' .. iid
local h = redis.call('HMGET', k, 'state', 'hash')
if h[1] == 'u' then
  redis.call('HSET', k, 'state', 'x')
  redis.call('ZREM', prefix .. 'unassigned', iid)
  redis.call('HDEL', prefix .. 'content', iid)
  history(hist, tp, feed, now, 'excluded', iid, redis.call('HGET', prefix .. 'guids', iid), h[2], '', '')
end
return h[1] or ''`)
