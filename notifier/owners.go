package notifier

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/dropstream/dropstream/internal/tenancy"
	"github.com/dropstream/dropstream/notifier/subscriber"
)

// OwnerLookup returns the tenant of a flow's own recipient and whether the
// id is known.
type OwnerLookup func(ctx context.Context, id string) (tenant string, found bool, err error)

// owners are the lookups flows registered, beside the subscribers'.
type owners struct {
	mu      sync.RWMutex
	lookups []OwnerLookup
}

// RegisterOwners adds a lookup of a flow's own recipients' tenants, so a
// notification shows only to its tenant. Call it from a flow's New.
func (f *Flow) RegisterOwners(l OwnerLookup) {
	f.owners.mu.Lock()
	defer f.owners.mu.Unlock()
	f.owners.lookups = append(f.owners.lookups, l)
}

// OwnerOf returns the tenant of recipient id; tenancy.Open if unknown.
func (f *Flow) OwnerOf(ctx context.Context, id string) (string, error) {
	if subscriber.ValidSubscriberID(id) {
		s, err := f.Subscribers().Resolve(ctx, id)
		switch {
		case errors.Is(err, subscriber.ErrNotFound):
			return tenancy.Open, nil
		case err != nil:
			return "", fmt.Errorf("notifier: owner of %s: %w", id, err)
		}
		return tenancy.Of(s.Tenant), nil
	}
	f.owners.mu.RLock()
	lookups := f.owners.lookups
	f.owners.mu.RUnlock()
	for _, l := range lookups {
		tenant, found, err := l(ctx, id)
		if err != nil {
			return "", fmt.Errorf("notifier: owner of %s: %w", id, err)
		}
		if found {
			return tenancy.Of(tenant), nil
		}
	}
	return tenancy.Open, nil
}
