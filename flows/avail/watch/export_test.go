package watch

import (
	"context"
	"time"

	"github.com/dropstream/dropstream/internal/tenancy"
)

// The defaults of Config's tags.
const (
	DefaultWindowTTL       = 35 * 24 * time.Hour
	DefaultMaxWindowFlips  = 16
	DefaultMaxPayloadBytes = 64 << 10
	DefaultConcurrency     = 8
)

// Update is UpdateIn for every tenant.
func (s *Store) Update(ctx context.Context, id string, p Patch) (Watcher, error) {
	return s.UpdateIn(ctx, tenancy.View{All: true}, id, p)
}

// Delete is DeleteIn for every tenant.
func (s *Store) Delete(ctx context.Context, id string) error {
	return s.DeleteIn(ctx, tenancy.View{All: true}, id)
}
