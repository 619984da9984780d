package feed

import (
	"context"
	"fmt"

	"github.com/dropstream/dropstream/internal/tenancy"
)

// Each tenant that added a feed holds it; a feed without tenants is
// tenancy.Open's.
func feedTenantsKey(id string) string     { return defsKey("tenants:" + id) }
func tenantFeedsKey(tenant string) string { return defsKey("tenant-feeds:" + tenancy.Of(tenant)) }

// AddTenant records that tenant holds feed id.
func (s *Store) AddTenant(ctx context.Context, id, tenant string) error {
	tenant = tenancy.Of(tenant)
	pipe := s.rdb.TxPipeline()
	pipe.SAdd(ctx, feedTenantsKey(id), tenant)
	pipe.SAdd(ctx, tenantFeedsKey(tenant), id)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("feed: tenant of %s: %w", id, err)
	}
	return nil
}

// Holds reports whether v sees feed id: v sees all, or v's tenant added
// it (tenancy.Open for a feed no tenant added).
func (s *Store) Holds(ctx context.Context, v tenancy.View, id string) (bool, error) {
	if v.All {
		return true, nil
	}
	pipe := s.rdb.Pipeline()
	n := pipe.SCard(ctx, feedTenantsKey(id))
	is := pipe.SIsMember(ctx, feedTenantsKey(id), v.Owner())
	if _, err := pipe.Exec(ctx); err != nil {
		return false, fmt.Errorf("feed: tenants of %s: %w", id, err)
	}
	if n.Val() == 0 {
		return v.Sees(tenancy.Open), nil
	}
	return is.Val(), nil
}

// DropTenant records that tenant no longer holds feed id, and reports
// whether other tenants still do (the feed then stays).
func (s *Store) DropTenant(ctx context.Context, id, tenant string) (othersHold bool, err error) {
	tenant = tenancy.Of(tenant)
	pipe := s.rdb.TxPipeline()
	pipe.SRem(ctx, feedTenantsKey(id), tenant)
	pipe.SRem(ctx, tenantFeedsKey(tenant), id)
	left := pipe.SCard(ctx, feedTenantsKey(id))
	if _, err := pipe.Exec(ctx); err != nil {
		return false, fmt.Errorf("feed: tenant of %s: %w", id, err)
	}
	return left.Val() > 0, nil
}

// TenantFeeds returns the ids of the feeds tenant holds.
func (s *Store) TenantFeeds(ctx context.Context, tenant string) ([]string, error) {
	ids, err := s.rdb.SMembers(ctx, tenantFeedsKey(tenant)).Result()
	if err != nil {
		return nil, fmt.Errorf("feed: feeds of a tenant: %w", err)
	}
	return ids, nil
}
