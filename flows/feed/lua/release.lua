
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
