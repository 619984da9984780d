package recordstore

import (
	"context"

	"github.com/dropstream/dropstream/internal/tenancy"
)

// Delete removes id's record, or returns an error wrapping ErrNotFound.
func (s *Store[T]) Delete(ctx context.Context, id string) error {
	return s.DeleteIn(ctx, tenancy.View{All: true}, id)
}
