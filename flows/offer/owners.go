package offer

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/tenancy"
)

// ownersKey is the hash offer id → tenant: only an offer's tenant (and
// admin keys) may replace, read alone or delete it.
var ownersKey = catalogKey("owner")

// ErrTaken is returned when an offer id is another tenant's.
var ErrTaken = errors.New("offer id held by another tenant")

// Owner returns the tenant of offer id, and whether the offer exists. An
// offer stored before tenants were recorded is tenancy.Open's.
func (c *Catalog) Owner(ctx context.Context, id string) (string, bool, error) {
	pipe := c.rdb.Pipeline()
	owner := pipe.HGet(ctx, ownersKey, id)
	exists := pipe.HExists(ctx, indexKey, id)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return "", false, fmt.Errorf("offer %s: owner: %w", id, err)
	}
	if !exists.Val() {
		return "", false, nil
	}
	return tenancy.Of(owner.Val()), true, nil
}

// Sees returns ErrNotFound unless offer id exists and v sees its tenant.
func (c *Catalog) Sees(ctx context.Context, v tenancy.View, id string) error {
	owner, ok, err := c.Owner(ctx, id)
	switch {
	case err != nil:
		return err
	case !ok || !v.Sees(owner):
		return ErrNotFound
	}
	return nil
}

// PutFor is Put of one offer of v's tenant: a new offer becomes its, one
// that exists must be one v sees (else ErrTaken) and keeps its tenant.
func (c *Catalog) PutFor(ctx context.Context, v tenancy.View, o Offer) (created bool, err error) {
	if err := c.check(o); err != nil {
		return false, err
	}
	owner, exists, err := c.Owner(ctx, o.ID)
	if err != nil {
		return false, err
	}
	if exists && !v.Sees(owner) {
		return false, fmt.Errorf("%w: %s", ErrTaken, o.ID)
	}
	if !exists {
		owner = v.Owner()
		// Filed first: an offer is never stored without its tenant.
		if err := c.rdb.HSet(ctx, ownersKey, o.ID, owner).Err(); err != nil {
			return false, fmt.Errorf("offer %s: owner: %w", o.ID, err)
		}
	}
	put, err := c.Put(ctx, o)
	if err != nil {
		if !exists { // a refused offer leaves nothing behind
			c.rdb.HDel(context.WithoutCancel(ctx), ownersKey, o.ID)
		}
		return false, err
	}
	return put[0], nil
}

// DeleteIn is Delete of an offer v sees: another tenant's is ErrNotFound.
func (c *Catalog) DeleteIn(ctx context.Context, v tenancy.View, id string) error {
	if err := c.Sees(ctx, v, id); err != nil {
		return err
	}
	if err := c.Delete(ctx, id); err != nil {
		return err
	}
	if err := c.rdb.HDel(ctx, ownersKey, id).Err(); err != nil {
		return fmt.Errorf("offer %s: owner: %w", id, err)
	}
	return nil
}
