package watch

import (
	"context"

	"github.com/dropstream/dropstream/internal/tenancy"
)

// Update is UpdateIn for every tenant.
func (s *Store) Update(ctx context.Context, id string, p Patch) (Watcher, error) {
	return s.UpdateIn(ctx, tenancy.View{All: true}, id, p)
}

// Delete is DeleteIn for every tenant.
func (s *Store) Delete(ctx context.Context, id string) error {
	return s.DeleteIn(ctx, tenancy.View{All: true}, id)
}
