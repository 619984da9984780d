
local prefix, now, hist, tp, feed, iid = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local k = prefix .. 'item:' .. iid
local h = redis.call('HMGET', k, 'state', 'hash')
if h[1] == 'u' then
  redis.call('HSET', k, 'state', 'x')
  redis.call('ZREM', prefix .. 'unassigned', iid)
  redis.call('HDEL', prefix .. 'content', iid)
  history(hist, tp, feed, now, 'excluded', iid, redis.call('HGET', prefix .. 'guids', iid), h[2], '', '')
end
return h[1] or ''