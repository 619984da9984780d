package comic

import (
	"encoding/json"

	"github.com/redis/go-redis/v9"
)

// States of a purchase record; charging and refunding are in doubt (in
// the purchases zset).
const (
	txnCharging  = "charging"
	txnSold      = "sold"
	txnRefunding = "refunding"
	txnRefunded  = "refunded"
)

// purchaseTTL is how long a settled purchase record is kept (seconds): a
// retry of the same transaction within it gets the same answer.
const purchaseTTL = "7776000" // 90 days

// beginPurchaseScript records a purchase before its charge, unless the
// listing is held for a wave without the buyer's subscription. KEYS txn,
// purchases zset, hold, lottery; ARGV txn id, comic id, email, payment,
// price, now ms, gen, subscription ("": none). Returns "new",
// "hold:<end ms>", or the existing record's state.
var beginPurchaseScript = redis.NewScript(`
local st = redis.call('HGET', KEYS[1], 'state')
if st then return st end
local h = redis.call('HMGET', KEYS[3], 'gen', 'wave', 'ends', 'size')
if h[1] == ARGV[7] and tonumber(h[3]) > tonumber(ARGV[6]) then
  local r = ARGV[8] ~= '' and redis.call('ZRANK', KEYS[4], ARGV[8])
  if not r or math.floor(r / tonumber(h[4])) + 1 ~= tonumber(h[2]) then return 'hold:' .. h[3] end
end
redis.call('HSET', KEYS[1], 'state', 'charging', 'comic', ARGV[2], 'email', ARGV[3], 'payment', ARGV[4], 'price', ARGV[5], 'at_ms', ARGV[6])
redis.call('ZADD', KEYS[2], ARGV[6], ARGV[1])
return 'new'`)

// sellScript sells a charged purchase (or marks it refunding when the
// comic is gone). KEYS inv, sale list, inventory zset, events stream, txn,
// purchases zset; ARGV comic id, sale JSON, email (JSON), txn id (JSON),
// price, now ms, trace id, txn id. Returns {state, gen}.
var sellScript = redis.NewScript(`
local st = redis.call('HGET', KEYS[5], 'state')
if st ~= 'charging' then return {st or 'missing', tonumber(redis.call('HGET', KEYS[5], 'gen') or '0')} end
local cur = redis.call('HMGET', KEYS[1], 'gen', 'added_at_ms', 'comic')
local gen = cur[1]
if not gen then
  redis.call('HSET', KEYS[5], 'state', 'refunding')
  return {'refunding', 0}
end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HSET', KEYS[5], 'state', 'sold', 'gen', gen)
redis.call('EXPIRE', KEYS[5], ` + purchaseTTL + `)
redis.call('ZREM', KEYS[6], ARGV[8])
redis.call('RPUSH', KEYS[2], (string.gsub(ARGV[2], '"gen":0', '"gen":' .. gen, 1)))
local ev = '{"kind":"sold","comic_id":"' .. ARGV[1] .. '","gen":' .. gen .. ',"at_ms":' .. ARGV[6] ..
  ',"email":' .. ARGV[3] .. ',"txn_id":' .. ARGV[4] .. ',"price_cents":' .. ARGV[5] .. ',"trace_id":"' .. ARGV[7] ..
  '","listed_at_ms":' .. cur[2] .. ',"comic":' .. cur[3] .. '}'
redis.call('XADD', KEYS[4], '*', 'key', ARGV[1], 'type', 'comic.event', 'payload', ev)
return {'sold', tonumber(gen)}`)

// refundedScript marks a purchase refunded and forgets the buyer's
// notification. KEYS txn, purchases zset, notified, ledger key, events
// stream; ARGV txn id, email, event JSON, comic id. Returns 1 when this
// call closed it.
var refundedScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'state') ~= 'refunding' then return 0 end
redis.call('HSET', KEYS[1], 'state', 'refunded')
redis.call('EXPIRE', KEYS[1], ` + purchaseTTL + `)
redis.call('ZREM', KEYS[2], ARGV[1])
if redis.call('HDEL', KEYS[3], ARGV[2]) == 1 then
  redis.call('XADD', KEYS[5], '*', 'key', ARGV[4], 'type', 'comic.event', 'payload', ARGV[3])
end
redis.call('DEL', KEYS[4])
return 1`)

// declinedScript drops a declined purchase, so a retry starts afresh.
// KEYS txn, purchases zset; ARGV txn id.
var declinedScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'state') ~= 'charging' then return 0 end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return 1`)

// forgetScript: KEYS notified, delivery ledger key, events stream; ARGV
// email, event JSON, comic id.
var forgetScript = redis.NewScript(`
local n = redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[2])
if n == 1 then redis.call('XADD', KEYS[3], '*', 'key', ARGV[3], 'type', 'comic.event', 'payload', ARGV[2]) end
return n`)

// jsonString encodes s as a JSON string.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
