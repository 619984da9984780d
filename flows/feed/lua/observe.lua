
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
return {0, new, edited, held}