package quota

import (
	"context"
	"strconv"
	"strings"
	"time"
)

// ticketTTL is how long a reservation may stay neither kept nor dropped
// (its process died between the two) before its slot is reclaimed.
const ticketTTL = time.Minute

// WithExists returns q freeing, at the cap, the slots of records exists
// says are gone and of reservations older than a minute.
func (q *Quota) WithExists(exists func(ctx context.Context, id string) (bool, error)) *Quota {
	if q == nil {
		return nil
	}
	c := *q
	c.exists = exists
	return &c
}

// prune frees owner's slots whose records are gone and returns how many;
// errors leave them.
func (q *Quota) prune(ctx context.Context, owner string) int {
	ids, err := q.rdb.SMembers(ctx, q.ownerKey(owner)).Result()
	if err != nil {
		return 0
	}
	freed := 0
	for _, id := range ids {
		if !q.gone(ctx, id) {
			continue
		}
		if err := releaseScript.Run(ctx, q.rdb, []string{q.ownerKey(owner), q.ownersKey()}, id, owner).Err(); err == nil {
			freed++
		}
	}
	return freed
}

// gone reports whether the slot of id may be freed: a reservation older
// than ticketTTL, or a record exists reports missing.
func (q *Quota) gone(ctx context.Context, id string) bool {
	if t, ok := strings.CutPrefix(id, ticketPrefix); ok {
		ms, _, _ := strings.Cut(t, ":")
		at, err := strconv.ParseInt(ms, 10, 64)
		return err == nil && time.Since(time.UnixMilli(at)) > ticketTTL
	}
	if q.exists == nil {
		return false
	}
	ok, err := q.exists(ctx, id)
	return err == nil && !ok
}
