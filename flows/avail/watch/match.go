package watch

import (
	"context"
	"fmt"
	"slices"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/internal/clip"
)

// Match returns the watchers the entity satisfies, in id order, with their
// Secrets. Only slots and restaurants match.
func (s *Store) Match(ctx context.Context, e avail.Entity) ([]Watcher, error) {
	if e.Kind != "" && e.Kind != avail.EntitySlot && e.Kind != avail.EntityRestaurant {
		return nil, nil
	}
	e = withIdentity(e)
	if e.Key == "" {
		return nil, nil
	}
	return s.union(ctx, matchKeys(e), "match "+clip.Marked(e.Key, maxQuoted), func(w Watcher) bool { return w.Matches(e) })
}

// union loads the watchers of the sets keys in id order, keeping those
// keep accepts; what names the read in errors.
func (s *Store) union(ctx context.Context, keys []string, what string, keep func(Watcher) bool) ([]Watcher, error) {
	ids, err := s.rdb.SUnion(ctx, keys...).Result()
	if err != nil {
		return nil, fmt.Errorf("notifier: %s: %w", what, err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	slices.Sort(ids)
	candidates, err := s.load(ctx, ids)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(candidates, func(w Watcher) bool { return !keep(w) }), nil
}

// withIdentity fills provider, venue, date and party size from the entity
// key when the entity left them out (a close carries only its key's parts).
func withIdentity(e avail.Entity) avail.Entity {
	if e.Provider != "" && e.Venue != "" {
		return e
	}
	parsed, err := avail.ParseKey(e.Key)
	if err != nil || parsed.Kind == avail.EntitySource {
		return e
	}
	parsed.VenueName, parsed.Attrs = e.VenueName, e.Attrs
	return parsed
}
