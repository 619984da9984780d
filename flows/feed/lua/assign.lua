
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
return {assigned, completed}