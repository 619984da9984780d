
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
return released