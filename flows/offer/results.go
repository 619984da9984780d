package offer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/rediskey"
)

// resultKeys are the keys of one logical result, in its partition's tag.
type resultKeys struct {
	partition int
	main      string // hash
	data      string // zset: offer ids by score
	values    string // hash: offer id → encoded match
	waiting   string // set: handlers not answered yet
	done      string // stream: completion notices
	live      string // liveKey
}

func (c Config) resultKeys(id string) resultKeys {
	p := c.partition(id)
	base := rediskey.Partition(Name, p, "offer", "result", id)
	return resultKeys{partition: p, main: base, data: base + ":data", values: base + ":values",
		waiting: base + ":waiting", done: base + ":done", live: c.liveKey(p)}
}

// liveKey is the zset of partition p's results that may still be served
// or joined, by expiry ms: what the freshness keeper checks changes against.
func (c Config) liveKey(p int) string {
	return rediskey.Partition(Name, p, "offer", "live")
}

func (k resultKeys) all() []string { return []string{k.main, k.data, k.values, k.waiting, k.done} }

// requestKey records a client's request id against the result it asked for.
func (c Config) requestKey(resultID, requestID string) string {
	return rediskey.Partition(Name, c.partition(resultID), "offer", "request", resultID, requestID)
}

// pageLua replies {outcome, main fields (without the element), total, ids,
// values}, reading a page of the data when withPage.
const pageLua = `
local fields = {'status', 'startedAt', 'completedAt', 'expiry', 'handlers', 'applied'}
local function reply(outcome, withPage, off, lim)
  local got = redis.call('HMGET', KEYS[1], unpack(fields))
  local m = {}
  for i, f in ipairs(fields) do
    if got[i] then m[#m + 1] = f; m[#m + 1] = got[i] end
  end
  if not withPage then return {outcome, m, 0, {}, {}} end
  local n = redis.call('ZCARD', KEYS[2])
  local ids = redis.call('ZRANGE', KEYS[2], off, off + lim - 1)
  local vals = {}
  if #ids > 0 then vals = redis.call('HMGET', KEYS[3], unpack(ids)) end
  return {outcome, m, n, ids, vals}
end
`

// beginScript decides how a search is served: "seen" (or "gone") for a
// request id seen before; "hit" with a page for a complete result; "join"
// for a fresh processing one; unless bypassing, else "miss": the result
// restarts processing and one message goes to each handler.
//
// KEYS: main, data, values, waiting, done, request, live index, then one
// stream per handler. ARGV: now, processing timeout, request id, unique
// request id, element, payload, traceparent, key lifetime while
// processing, offset, limit, request key lifetime, result id, bypass
// (1/0), catalog epoch, then the handler tags.
var beginScript = redis.NewScript(pageLua + `
local now = tonumber(ARGV[1])
local st = redis.call('HMGET', KEYS[1], 'status', 'expiry', 'startedAt')
local status, expiry, started = st[1], tonumber(st[2] or '0'), tonumber(st[3] or '0')
local bypass = ARGV[13] == '1'

local off, lim = tonumber(ARGV[9]), tonumber(ARGV[10])
if ARGV[3] ~= '' and redis.call('EXISTS', KEYS[6]) == 1 then
  if not status then return {'gone', {}, 0, {}, {}} end
  return reply('seen', status == 'complete', off, lim)
end
local function remember()
  if ARGV[3] ~= '' then redis.call('SET', KEYS[6], '1', 'PX', ARGV[11]) end
end
if status == 'complete' and expiry > now and not bypass then
  remember()
  return reply('hit', true, off, lim)
end
if status == 'processing' and started + tonumber(ARGV[2]) > now and not bypass
  and redis.call('HEXISTS', KEYS[1], 'invalidated') == 0 then
  remember()
  return reply('join', false, off, lim)
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
redis.call('HSET', KEYS[1], 'status', 'processing', 'logicalType', 'sellOffer', 'logicalElement', ARGV[5],
  'uniqueRequestId', ARGV[4], 'startedAt', ARGV[1], 'expiry', 0, 'handlers', #ARGV - 14, 'applied', 0, 'epoch', ARGV[14])
for i = 15, #ARGV do redis.call('SADD', KEYS[4], ARGV[i]) end
redis.call('ZADD', KEYS[7], now + tonumber(ARGV[8]), ARGV[12])
for i = 8, #KEYS do
  if ARGV[7] ~= '' then
    redis.call('XADD', KEYS[i], '*', 'key', ARGV[12], 'type', 'offer.evaluate', 'payload', ARGV[6], 'traceparent', ARGV[7])
  else
    redis.call('XADD', KEYS[i], '*', 'key', ARGV[12], 'type', 'offer.evaluate', 'payload', ARGV[6])
  end
end
redis.call('PEXPIRE', KEYS[1], ARGV[8])
redis.call('PEXPIRE', KEYS[4], ARGV[8])
remember()
return reply('miss', false, off, lim)`)

// pageScript reads a result: KEYS main, data, values; ARGV offset, limit.
var pageScript = redis.NewScript(pageLua + `
if redis.call('EXISTS', KEYS[1]) == 0 then return {'none', {}, 0, {}, {}} end
return reply('page', true, tonumber(ARGV[1]), tonumber(ARGV[2]))`)

// appendScript writes part of a handler's matches while the result's
// generation is ARGV[1] and handler ARGV[2] still waits. KEYS main, data,
// values, waiting; ARGV uid, handler, then (offer id, score, value) triples.
var appendScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'uniqueRequestId') ~= ARGV[1] then return 0 end
if redis.call('SISMEMBER', KEYS[4], ARGV[2]) == 0 then return 0 end
for i = 3, #ARGV, 3 do
  redis.call('ZADD', KEYS[2], ARGV[i + 1], ARGV[i])
  redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 2])
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[2], ttl)
  redis.call('PEXPIRE', KEYS[3], ttl)
end
return 1`)

// finishScript removes handler ARGV[2] from the waiting set; whoever
// empties it completes the result and notifies the waiters. Replies
// {"stale"|"duplicate"|"partial"|"complete", startedAt}. KEYS main, data,
// values, waiting, done, live index; ARGV uid, handler, now, ttl, grace,
// result id.
var finishScript = redis.NewScript(`
local m = redis.call('HMGET', KEYS[1], 'uniqueRequestId', 'startedAt')
if m[1] ~= ARGV[1] then return {'stale', '0'} end
if redis.call('SREM', KEYS[4], ARGV[2]) == 0 then return {'duplicate', m[2]} end
redis.call('HINCRBY', KEYS[1], 'applied', 1)
if redis.call('SCARD', KEYS[4]) > 0 then return {'partial', m[2]} end
local now, ttl = tonumber(ARGV[3]), tonumber(ARGV[4])
local expiry = now + ttl
if redis.call('HEXISTS', KEYS[1], 'invalidated') == 1 then expiry = now end
redis.call('HSET', KEYS[1], 'status', 'complete', 'completedAt', ARGV[3], 'expiry', expiry,
  'matches', redis.call('ZCARD', KEYS[2]), 'lastRequestId', ARGV[1])
redis.call('HDEL', KEYS[1], 'uniqueRequestId', 'invalidated')
redis.call('XADD', KEYS[5], '*', 'status', 'complete')
for i = 1, 5 do redis.call('PEXPIRE', KEYS[i], ttl + tonumber(ARGV[5])) end
redis.call('ZADD', KEYS[6], now + ttl + tonumber(ARGV[5]), ARGV[6])
return {'complete', m[2]}`)

// Result statuses.
const (
	StatusProcessing = "processing"
	StatusComplete   = "complete"
	StatusExpired    = "expired" // complete, past its expiry
)

// Result is a logical result, or a page of it.
type Result struct {
	ResultID    string     `json:"resultId"`
	Status      string     `json:"status"`
	StartedAt   *time.Time `json:"startedAt,omitempty"`
	CompletedAt *time.Time `json:"completedAt,omitempty"`
	ExpiresAt   *time.Time `json:"expiresAt,omitempty"`
	Waiting     int        `json:"waitingHandlers"` // handlers not answered yet
	// Total is the number of matching offers; Matches is the page from
	// Offset, cheapest first, then by offer id.
	Total      int     `json:"total"`
	Offset     int     `json:"offset"`
	NextOffset int     `json:"nextOffset,omitempty"`
	Matches    []Match `json:"matches"`
}

// parseReply decodes {outcome, main fields, total, ids, values}.
func parseReply(id string, now time.Time, raw any, offset int) (string, Result, error) {
	arr, ok := raw.([]any)
	if !ok || len(arr) != 5 {
		return "", Result{}, fmt.Errorf("offer: result %s: unexpected reply %T", id, raw)
	}
	outcome, _ := arr[0].(string)
	fields, _ := arr[1].([]any)
	m := make(map[string]string, len(fields)/2)
	for i := 0; i+1 < len(fields); i += 2 {
		m[str(fields[i])] = str(fields[i+1])
	}
	r := Result{ResultID: id, Status: m["status"], Offset: offset, Matches: []Match{}}
	r.StartedAt, r.CompletedAt, r.ExpiresAt = msTime(m["startedAt"]), msTime(m["completedAt"]), msTime(m["expiry"])
	if r.Status == StatusComplete && r.ExpiresAt != nil && !r.ExpiresAt.After(now) {
		r.Status = StatusExpired
	}
	if r.Status == StatusProcessing {
		h, _ := strconv.Atoi(m["handlers"])
		a, _ := strconv.Atoi(m["applied"])
		r.Waiting = max(0, h-a)
	}
	total, _ := arr[2].(int64)
	r.Total = int(total)
	ids, _ := arr[3].([]any)
	vals, _ := arr[4].([]any)
	for i, x := range ids {
		v := ""
		if i < len(vals) {
			v = str(vals[i])
		}
		match, err := decodeMatch(str(x), v)
		if err != nil {
			return "", Result{}, err
		}
		r.Matches = append(r.Matches, match)
	}
	if offset+len(r.Matches) < r.Total {
		r.NextOffset = offset + len(r.Matches)
	}
	return outcome, r, nil
}

// msTime reads Unix ms; nil when v is not a positive number.
func msTime(v string) *time.Time {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
		t := time.UnixMilli(n).UTC()
		return &t
	}
	return nil
}

// loadScripts loads the scripts run by EVALSHA in pipelines.
func loadScripts(ctx context.Context, rdb redis.UniversalClient) error {
	if err := errors.Join(appendScript.Load(ctx, rdb).Err(), finishScript.Load(ctx, rdb).Err()); err != nil {
		return fmt.Errorf("offer: load script: %w", err)
	}
	return nil
}
