package watch

import (
	"context"
	"fmt"
	"slices"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/internal/clip"
)

// Match returns the watchers the entity satisfies, in id order, with
// their Secrets: one SUNION of its index sets, one MGET per 500
// candidates, then Watcher.Matches. Only slots and restaurants match.
func (s *Store) Match(ctx context.Context, e avail.Entity) ([]Watcher, error) {
	if e.Kind != "" && e.Kind != avail.EntitySlot && e.Kind != avail.EntityRestaurant {
		return nil, nil
	}
	e = withIdentity(e)
	if e.Key == "" {
		return nil, nil
	}
	ids, err := s.rdb.SUnion(ctx, matchKeys(e)...).Result()
	if err != nil {
		return nil, fmt.Errorf("notifier: match %s: %w", clip.Marked(e.Key, maxQuoted), err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	slices.Sort(ids)
	candidates, err := s.load(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := candidates[:0]
	for _, w := range candidates {
		if w.Matches(e) {
			out = append(out, w)
		}
	}
	return out, nil
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
