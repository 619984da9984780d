
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
return #iids