package watch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/avail"
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

// Update patches a watcher, validates it as Create does and stores it with
// its index atomically; the result has no Secret. Errors wrap
// ErrInvalidWatcher or ErrNotFound.
func (s *Store) Update(ctx context.Context, id string, p Patch) (Watcher, error) {
	return s.UpdateIn(ctx, tenancy.View{All: true}, id, p)
}

// UpdateIn is Update of a watcher v sees: another tenant's is ErrNotFound.
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
