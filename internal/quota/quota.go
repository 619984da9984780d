// Package quota caps how many records of a kind each owner holds, with
// one script on one slot per step.
package quota

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/internal/rediskey"
	"github.com/dropstream/dropstream/internal/script"
)

// ErrExceeded is wrapped by Claim when the owner already holds its cap.
var ErrExceeded = errors.New("quota exceeded")

// maxQuoted bounds the owners and ids quoted in errors.
const maxQuoted = 80

// Quota is the cap of one kind of record per owner; a nil *Quota caps
// nothing. It is safe for concurrent use.
type Quota struct {
	rdb    redis.UniversalClient
	kind   string
	max    int
	tag    string
	exists func(ctx context.Context, id string) (bool, error)
}

// New returns the quota of kind ("watchers", "feeds") with cap max records
// per owner; max below 1 is an error.
func New(rdb redis.UniversalClient, kind string, max int) (*Quota, error) {
	if kind == "" || max < 1 {
		return nil, fmt.Errorf("quota: kind %q, max %d: want a kind and a max of 1 or more", kind, max)
	}
	return &Quota{rdb: rdb, kind: kind, max: max, tag: rediskey.Tag("quota." + kind)}, nil
}

// Optional is New, or nil (no cap) when max is below 1.
func Optional(rdb redis.UniversalClient, kind string, max int) (*Quota, error) {
	if max < 1 {
		return nil, nil
	}
	return New(rdb, kind, max)
}

// Max returns the cap per owner.
func (q *Quota) Max() int { return q.max }

func (q *Quota) ownerKey(owner string) string { return rediskey.Key(q.tag, "owner", owner) }
func (q *Quota) ownersKey() string            { return rediskey.Key(q.tag, "owners") }

// claimScript files an id under its owner unless the owner holds max ids.
// KEYS: owner's set, id → owner hash. ARGV: id, owner, max. Returns 1 when
// filed (or already), 0 at the cap.
var claimScript = script.New(`
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return 1 end
if redis.call('SCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('SADD', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return 1`)

// Claim files id under owner before the record is written, or returns
// ErrExceeded; release it when the write fails.
func (q *Quota) Claim(ctx context.Context, owner, id string) error {
	if q == nil {
		return nil
	}
	n, err := claimScript.Run(ctx, q.rdb, []string{q.ownerKey(owner), q.ownersKey()}, id, owner, q.max).Int()
	if err == nil && n == 0 && q.prune(ctx, owner) > 0 {
		n, err = claimScript.Run(ctx, q.rdb, []string{q.ownerKey(owner), q.ownersKey()}, id, owner, q.max).Int()
	}
	if err != nil {
		return fmt.Errorf("quota: claim %s %q: %w", q.kind, clip.Marked(id, maxQuoted), err)
	}
	if n == 0 {
		return fmt.Errorf("%w: %q already holds %d %s", ErrExceeded, clip.Marked(owner, maxQuoted), q.max, q.kind)
	}
	return nil
}

// releaseScript unfiles an id still filed under owner. KEYS: owner's set,
// id → owner hash. ARGV: id, owner.
var releaseScript = script.New(`
if redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('SREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return 1`)

// Release takes the record id out of its owner's count; an id never
// claimed, or released already, changes nothing.
func (q *Quota) Release(ctx context.Context, id string) error {
	if q == nil {
		return nil
	}
	owner, err := q.rdb.HGet(ctx, q.ownersKey(), id).Result()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err == nil {
		err = releaseScript.Run(ctx, q.rdb, []string{q.ownerKey(owner), q.ownersKey()}, id, owner).Err()
	}
	if err != nil {
		return fmt.Errorf("quota: release %s %q: %w", q.kind, clip.Marked(id, maxQuoted), err)
	}
	return nil
}
