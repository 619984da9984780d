package comic

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/dropstream/dropstream/internal/script"
)

// createScript stores a subscription with all its index entries; a full
// shard starts the next one. KEYS subs, email set, patterns, index shard,
// field totals, version, bloat, tenant email set, then a field-stats zset
// per field; ARGV id, record, pattern, bloat field, max per email, bloat
// threshold, shard, index member, its score ("": a set index), then the
// index values and field names. Returns 1, 0 duplicate, -1 too many.
var createScript = script.New(`
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 0 end
if redis.call('SCARD', KEYS[8]) >= tonumber(ARGV[5]) then return -1 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('SADD', KEYS[8], ARGV[1])
if tonumber(redis.call('ZINCRBY', KEYS[3], 1, ARGV[3])) == 1 then redis.call('INCR', KEYS[6]) end
local card
if ARGV[9] == '' then
  redis.call('SADD', KEYS[4], ARGV[8])
  card = redis.call('SCARD', KEYS[4])
else
  redis.call('ZADD', KEYS[4], ARGV[9], ARGV[8])
  card = redis.call('ZCARD', KEYS[4])
end
local k = tonumber(ARGV[7])
if card >= tonumber(ARGV[6]) and tonumber(redis.call('HGET', KEYS[7], ARGV[4]) or '0') == k then
  redis.call('HSET', KEYS[7], ARGV[4], k + 1)
  redis.call('INCR', KEYS[6])
end
local nf = #KEYS - 8
for i = 1, nf do
  redis.call('ZINCRBY', KEYS[8 + i], 1, ARGV[9 + i])
  redis.call('HINCRBY', KEYS[5], ARGV[9 + nf + i], 1)
end
return 1`)

// deleteScript removes a subscription; it takes createScript's keys and
// arguments. A value set keeps its shards when they empty.
var deleteScript = script.New(`
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('SREM', KEYS[2], ARGV[1])
redis.call('SREM', KEYS[8], ARGV[1])
if tonumber(redis.call('ZINCRBY', KEYS[3], -1, ARGV[3])) <= 0 then
  redis.call('ZREM', KEYS[3], ARGV[3])
  redis.call('INCR', KEYS[6])
end
if ARGV[9] == '' then redis.call('SREM', KEYS[4], ARGV[8]) else redis.call('ZREM', KEYS[4], ARGV[8]) end
local nf = #KEYS - 8
for i = 1, nf do
  if tonumber(redis.call('ZINCRBY', KEYS[8 + i], -1, ARGV[9 + i])) <= 0 then redis.call('ZREM', KEYS[8 + i], ARGV[9 + i]) end
  if redis.call('HINCRBY', KEYS[5], ARGV[9 + nf + i], -1) <= 0 then redis.call('HDEL', KEYS[5], ARGV[9 + nf + i]) end
end
return 1`)

// scriptArgs returns the keys and arguments of createScript and
// deleteScript for sub, whose values hash to vh.
func (s *Store) scriptArgs(sub Subscription, b Body, vh string) ([]string, []any) {
	rec, _ := json.Marshal(sub)
	names := splitPattern(sub.Pattern)
	keys := []string{subsKey, emailKey(sub.Email), patternsKey, indexKey(sub.Pattern, vh, sub.Shard), fieldTotalKey,
		patVersionKey, bloatKey, tenantEmailKey(sub.Tenant, sub.Email)}
	member, score := indexEntry(sub.ID, b, names)
	args := []any{sub.ID, rec, sub.Pattern, bloatField(sub.Pattern, vh), s.cfg.MaxPerEmail, s.cfg.BloatThreshold, sub.Shard, member, score}
	fieldNames := make([]string, len(names))
	for i, n := range names {
		fieldNames[i], _ = splitToken(n)
		keys = append(keys, fieldStatsKey(fieldNames[i]))
		args = append(args, indexValue(b[fieldNames[i]]))
	}
	for _, n := range fieldNames {
		args = append(args, n)
	}
	return keys, args
}

// CreateMany creates subscriptions in pipelined batches and returns how
// many were created, skipping duplicates and those over MaxPerEmail; the
// first invalid one stops it.
func (s *Store) CreateMany(ctx context.Context, subs []NewSubscription) (int, error) {
	created := 0
	const chunk = 100 // scripts per pipeline: bounds one round trip
	for start := 0; start < len(subs); start += chunk {
		batch := subs[start:min(start+chunk, len(subs))]
		parsed := make([]Subscription, len(batch))
		bodies := make([]Body, len(batch))
		hashes := make([]string, len(batch))
		fields := make([]string, len(batch))
		for i, in := range batch {
			sub, b, err := s.newSubscription(in)
			if err != nil {
				return created, err
			}
			parsed[i], bodies[i] = sub, b
			hashes[i] = valuesHash(b, splitPattern(sub.Pattern))
			fields[i] = bloatField(sub.Pattern, hashes[i])
		}
		shards, err := s.rdb.HMGet(ctx, bloatKey, fields...).Result()
		if err != nil {
			return created, fmt.Errorf("comic: shards: %w", err)
		}
		calls := make([]script.Call, len(batch))
		for i := range batch {
			if v, ok := shards[i].(string); ok {
				parsed[i].Shard, _ = strconv.Atoi(v)
			}
			keys, args := s.scriptArgs(parsed[i], bodies[i], hashes[i])
			calls[i] = script.Call{Keys: keys, Args: args}
		}
		cmds, _ := createScript.RunAll(ctx, s.rdb, calls) // errors are read per command
		for _, c := range cmds {
			n, err := c.Int64()
			if err != nil {
				return created, fmt.Errorf("comic: create subscription: %w", err)
			}
			if n == 1 {
				created++
			}
		}
	}
	return created, nil
}
