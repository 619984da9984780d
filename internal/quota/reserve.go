package quota

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/internal/script"
)

// Reservation holds a slot of an owner's cap until Keep or Drop; a nil
// *Reservation does nothing.
type Reservation struct {
	q      *Quota
	ticket string
}

// ticketPrefix marks reservation tickets among the ids of a set; ids
// of records never start with it.
const ticketPrefix = "\x00ticket:"

// Reserve holds one slot of owner's cap, or returns ErrExceeded.
func (q *Quota) Reserve(ctx context.Context, owner string) (*Reservation, error) {
	if q == nil {
		return nil, nil
	}
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	r := &Reservation{q: q, ticket: ticketPrefix + strconv.FormatInt(time.Now().UnixMilli(), 10) + ":" + hex.EncodeToString(b[:])}
	if err := q.Claim(ctx, owner, r.ticket); err != nil {
		return nil, err
	}
	return r, nil
}

// ReserveFor is Reserve for a chosen id; an id counted already needs no
// slot (nil *Reservation).
func (q *Quota) ReserveFor(ctx context.Context, owner, id string) (*Reservation, error) {
	if q == nil {
		return nil, nil
	}
	held, err := q.rdb.HExists(ctx, q.ownersKey(), id).Result()
	if err != nil {
		return nil, fmt.Errorf("quota: reserve %s %q: %w", q.kind, clip.Marked(id, maxQuoted), err)
	}
	if held {
		return nil, nil
	}
	return q.Reserve(ctx, owner)
}

// keepScript files an id in place of a ticket (an id filed already keeps
// its owner). KEYS: owner's set, id → owner hash. ARGV: ticket, id, owner.
var keepScript = script.New(`
if redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[3] then return 0 end
redis.call('SREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
if redis.call('HEXISTS', KEYS[2], ARGV[2]) == 1 then return 2 end
redis.call('SADD', KEYS[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
return 1`)

// Keep ends the reservation: id now counts against the owner until
// Release(id).
func (r *Reservation) Keep(ctx context.Context, id string) error {
	if r == nil {
		return nil
	}
	q := r.q
	owner, err := q.rdb.HGet(ctx, q.ownersKey(), r.ticket).Result()
	if errors.Is(err, redis.Nil) {
		return fmt.Errorf("quota: keep %s %q: reservation gone", q.kind, clip.Marked(id, maxQuoted))
	}
	if err == nil {
		err = keepScript.Run(ctx, q.rdb, []string{q.ownerKey(owner), q.ownersKey()}, r.ticket, id, owner).Err()
	}
	if err != nil {
		return fmt.Errorf("quota: keep %s %q: %w", q.kind, clip.Marked(id, maxQuoted), err)
	}
	return nil
}

// Drop ends the reservation without a record (the create failed, or found
// the record it would have made): its slot is free again.
func (r *Reservation) Drop(ctx context.Context) error {
	if r == nil {
		return nil
	}
	return r.q.Release(ctx, r.ticket)
}
