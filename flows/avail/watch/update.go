package watch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/internal/recordstore"
	"github.com/dropstream/dropstream/internal/tenancy"
)

// Patch is a partial update of a watcher: a field left out or null keeps
// its value, a field given replaces it.
type Patch struct {
	Name              *string   `json:"name,omitempty"`
	Provider          *string   `json:"provider,omitempty"`
	Venue             *string   `json:"venue,omitempty"`
	DateFrom          *string   `json:"date_from,omitempty"`
	DateTo            *string   `json:"date_to,omitempty"`
	PartySizes        *[]int    `json:"party_sizes,omitempty"`
	Slot              *string   `json:"slot,omitempty"`
	Channel           *string   `json:"channel,omitempty"`
	WebhookURL        *string   `json:"webhook_url,omitempty"`
	Paused            *bool     `json:"paused,omitempty"`
	Windows           *[]Window `json:"windows,omitempty"`
	TimeZone          *string   `json:"time_zone,omitempty"`
	NotifyGone        *bool     `json:"notify_gone,omitempty"`
	RearmAfterMinutes *int      `json:"rearm_after_minutes,omitempty"`
	Provisional       *bool     `json:"provisional,omitempty"`
	MuteSourceHealth  *bool     `json:"mute_source_health,omitempty"`
}

// apply returns w with the patch's fields set: the patch's JSON, which
// has only the fields given, decoded over w (its fields share the names).
func (p Patch) apply(w Watcher) (Watcher, error) {
	if p.PartySizes != nil {
		w.PartySizes = nil // decoded afresh, not into the old array
	}
	if p.Windows != nil {
		w.Windows = nil
	}
	body, err := json.Marshal(p)
	if err == nil {
		err = json.Unmarshal(body, &w)
	}
	if err != nil {
		return Watcher{}, fmt.Errorf("notifier: patch watcher: %w", err)
	}
	return w, nil
}

// UpdateIn patches a watcher v sees, validates it as Create does and stores
// it with its index atomically; the result has no Secret. Errors wrap
// ErrInvalidWatcher or ErrNotFound (also for another tenant's watcher).
func (s *Store) UpdateIn(ctx context.Context, v tenancy.View, id string, p Patch) (Watcher, error) {
	if !validID(id) {
		return Watcher{}, fmt.Errorf("%w: malformed id", ErrNotFound)
	}
	var invalid error
	w, err := s.records.UpdateAlso(ctx, v, id, func(w *Watcher) error {
		next, err := p.apply(*w)
		if err == nil {
			err = next.Validate()
		}
		*w, invalid = next, err
		return err
	}, func(pipe redis.Pipeliner, old, w Watcher) {
		for _, k := range indexKeys(old) {
			pipe.SRem(ctx, k, id)
		}
		for _, k := range indexKeys(w) {
			pipe.SAdd(ctx, k, id)
		}
	})
	switch {
	case errors.Is(err, recordstore.ErrNotFound):
		return Watcher{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	case err != nil && err == invalid:
		return Watcher{}, err
	case err != nil:
		return Watcher{}, fmt.Errorf("notifier: update watcher %s: %w", id, err)
	}
	w.Secret = ""
	return w, nil
}

// ServedBy returns the watchers that may match an entity of src's scopes,
// with Secrets, in id order, paused and muted ones included.
func (s *Store) ServedBy(ctx context.Context, provider string, scopes []avail.Scope) ([]Watcher, error) {
	if provider == "" {
		return nil, nil
	}
	var venues []string
	for _, sc := range scopes {
		if sc.Venue != "" && !slices.Contains(venues, sc.Venue) {
			venues = append(venues, sc.Venue)
		}
	}
	return s.union(ctx, sourceKeys(provider, venues), "watchers of provider "+provider, func(w Watcher) bool {
		return slices.ContainsFunc(scopes, func(sc avail.Scope) bool { return w.serves(provider, sc) })
	})
}

// serves reports whether a scope of a provider may yield entities the
// watcher matches (its windows aside).
func (w Watcher) serves(provider string, sc avail.Scope) bool {
	venue, date, party := w.Venue, "", 0
	if w.Slot != "" {
		e, err := avail.ParseKey(w.Slot)
		if err != nil {
			return false
		}
		venue, date, party = e.Venue, e.Date, e.PartySize
	}
	switch {
	case w.Provider != "" && w.Provider != provider,
		venue != "" && venue != sc.Venue,
		date != "" && sc.Date != "" && date != sc.Date,
		party != 0 && sc.PartySize != 0 && party != sc.PartySize,
		sc.Date != "" && (w.DateFrom != "" && sc.Date < w.DateFrom || w.DateTo != "" && sc.Date > w.DateTo),
		sc.PartySize != 0 && len(w.PartySizes) > 0 && !slices.Contains(w.PartySizes, sc.PartySize):
		return false
	}
	return true
}

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
