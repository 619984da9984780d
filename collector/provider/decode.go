package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/internal/clip"
)

// decodeJSON decodes one JSON document of at most avail.MaxRawBodySize bytes
// into v and rejects anything after it.
func decodeJSON(provider string, body []byte, v any) error {
	if len(body) == 0 {
		return malformed(provider, "empty body")
	}
	if len(body) > avail.MaxRawBodySize {
		return malformed(provider, "body of %d bytes exceeds %d", len(body), avail.MaxRawBodySize)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return malformed(provider, "invalid JSON: %s", clip.Marked(err.Error(), maxQuoted))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return malformed(provider, "data after the JSON document")
	}
	return nil
}

// maxQuoted bounds a string taken from outside input for an error
// message (see clip.Marked).
const maxQuoted = 200

// checkText bounds a free-text field (a name or an attribute).
func checkText(provider, field, s string, limit int) error {
	switch {
	case len(s) > limit:
		return malformed(provider, "%s is longer than %d bytes", field, limit)
	case !utf8.ValidString(s):
		return malformed(provider, "%s is not valid UTF-8", field)
	case strings.ContainsAny(s, "\x00\r\n"):
		return malformed(provider, "%s contains a control character", field)
	}
	return nil
}

// parseHHMM checks a "15:04" time of day.
func parseHHMM(s string) bool {
	_, err := time.Parse("15:04", s)
	return len(s) == 5 && err == nil
}

// venueID formats a provider's numeric venue id as the venue part of a key.
func venueID(provider, field string, id *int64) (string, error) {
	if id == nil {
		return "", malformed(provider, "%s is missing", field)
	}
	if *id <= 0 {
		return "", malformed(provider, "%s %d is not a positive id", field, *id)
	}
	return strconv.FormatInt(*id, 10), nil
}

// numericVenue checks that a scope's venue, when set, is a provider id.
func numericVenue(provider string, scope avail.Scope) error {
	if id, err := strconv.ParseInt(scope.Venue, 10, 64); scope.Venue != "" && (err != nil || id <= 0) {
		return errors.New(provider + ": venue " + strconv.Quote(scope.Venue) + " must be a positive numeric id")
	}
	return nil
}

// entities collects the entities of one response: deduplicated by key,
// bounded by avail.MaxEntities, slot or restaurant level.
type entities struct {
	provider        string
	party           int
	restaurantLevel bool
	index           map[string]int
	out             []avail.Entity
}

func newEntities(provider string, scope avail.Scope, restaurantLevel bool) *entities {
	return &entities{provider: provider, party: scope.PartySize, restaurantLevel: restaurantLevel, index: map[string]int{}, out: []avail.Entity{}}
}

// add records one open slot. kind is the slot's seating type ("" if none);
// it is kept in the "type" attribute, the sorted distinct types of the key.
func (e *entities) add(venue, venueName, date, hhmm, kind string) error {
	if err := avail.CleanPart("venue", venue); err != nil {
		return malformed(e.provider, "%v", err)
	}
	key := avail.SlotKey(e.provider, venue, date, hhmm, e.party)
	if e.restaurantLevel {
		key = avail.RestaurantKey(e.provider, venue, date, e.party)
	}
	if i, ok := e.index[key]; ok {
		ent := &e.out[i]
		if e.restaurantLevel {
			n, _ := strconv.Atoi(ent.Attrs["slots"])
			ent.Attrs["slots"] = strconv.Itoa(n + 1)
		} else if kind != "" {
			ent.Attrs = mergeType(ent.Attrs, kind)
		}
		return nil
	}
	if len(e.out) >= avail.MaxEntities {
		return malformed(e.provider, "more than %d entities", avail.MaxEntities)
	}
	ent := avail.Entity{Key: key, Kind: avail.EntitySlot, Provider: e.provider, Venue: venue,
		VenueName: venueName, Date: date, Time: hhmm, PartySize: e.party}
	if e.restaurantLevel {
		ent.Kind, ent.Time = avail.EntityRestaurant, ""
		ent.Attrs = map[string]string{"slots": "1"}
	} else if kind != "" {
		ent.Attrs = map[string]string{"type": kind}
	}
	e.index[key] = len(e.out)
	e.out = append(e.out, ent)
	return nil
}

// mergeType adds kind to the comma-separated sorted set in attrs["type"].
func mergeType(attrs map[string]string, kind string) map[string]string {
	if attrs == nil {
		return map[string]string{"type": kind}
	}
	kinds := strings.Split(attrs["type"], ",")
	if slices.Contains(kinds, kind) {
		return attrs
	}
	kinds = append(kinds, kind)
	slices.Sort(kinds)
	if joined := strings.Join(kinds, ","); len(joined) <= MaxAttrLen {
		attrs["type"] = joined
	}
	return attrs
}

// result returns the entities sorted by key, never nil.
func (e *entities) result() []avail.Entity {
	slices.SortFunc(e.out, func(a, b avail.Entity) int { return strings.Compare(a.Key, b.Key) })
	return e.out
}
