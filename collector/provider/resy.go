package provider

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/internal/clip"
)

// resyAdapter speaks the Resy-style find API:
//
//	GET {base}/4/find?lat=0&long=0&day=YYYY-MM-DD&party_size=N[&venue_id=ID][&query=Q]
//	→ {"results": {"venues": [{"venue": {"id": {"resy": 123}, "name": "..."},
//	   "slots": [{"config": {"type": "Dining Room"}, "date": {"start": "2026-11-22 19:30:00"}}]}]}}
//
// Venues, their ids and slots' date.start are required; config.type is
// kept as the "type" attribute.
type resyAdapter struct{ name string }

func (a resyAdapter) Name() string { return a.name }

func (a resyAdapter) ValidateScope(scope avail.Scope) error { return numericVenue(a.name, scope) }

func (a resyAdapter) NewRequest(ctx context.Context, base string, scope avail.Scope) (*http.Request, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("%s: base URL: %w", a.name, err)
	}
	u = u.JoinPath("4", "find")
	q := url.Values{}
	q.Set("lat", "0")
	q.Set("long", "0")
	q.Set("day", scope.Date)
	q.Set("party_size", strconv.Itoa(scope.PartySize))
	if scope.Venue != "" {
		q.Set("venue_id", scope.Venue)
	}
	if scope.Query != "" {
		q.Set("query", scope.Query)
	}
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", a.name, err)
	}
	req.Header.Set("Accept", "application/json")
	return req, nil
}

type resyResponse struct {
	Results *struct {
		Venues *[]resyVenue `json:"venues"`
	} `json:"results"`
}

type resyVenue struct {
	Venue *struct {
		ID *struct {
			Resy *int64 `json:"resy"`
		} `json:"id"`
		Name string `json:"name"`
	} `json:"venue"`
	Slots []resySlot `json:"slots"`
}

type resySlot struct {
	Config *struct {
		Type string `json:"type"`
	} `json:"config"`
	Date *struct {
		Start string `json:"start"`
	} `json:"date"`
}

// resyStartLayout is the layout of a slot's date.start.
const resyStartLayout = "2006-01-02 15:04:05"

func (a resyAdapter) Parse(body []byte, scope avail.Scope, restaurantLevel bool) ([]avail.Entity, error) {
	var r resyResponse
	if err := decodeJSON(a.name, body, &r); err != nil {
		return nil, err
	}
	if r.Results == nil || r.Results.Venues == nil {
		return nil, malformed(a.name, "results.venues is missing")
	}
	venues := *r.Results.Venues
	if len(venues) > MaxVenues {
		return nil, malformed(a.name, "%d venues exceed %d", len(venues), MaxVenues)
	}
	ents := newEntities(a.name, scope, restaurantLevel)
	for i, v := range venues {
		at := fmt.Sprintf("results.venues[%d]", i)
		if v.Venue == nil || v.Venue.ID == nil {
			return nil, malformed(a.name, "%s.venue.id is missing", at)
		}
		venue, err := venueID(a.name, at+".venue.id.resy", v.Venue.ID.Resy)
		if err != nil {
			return nil, err
		}
		if err := checkText(a.name, at+".venue.name", v.Venue.Name, avail.MaxFieldLen); err != nil {
			return nil, err
		}
		if len(v.Slots) > MaxSlotsPerVenue {
			return nil, malformed(a.name, "%s has %d slots, more than %d", at, len(v.Slots), MaxSlotsPerVenue)
		}
		for j, s := range v.Slots {
			sat := fmt.Sprintf("%s.slots[%d]", at, j)
			if s.Date == nil {
				return nil, malformed(a.name, "%s.date is missing", sat)
			}
			start, err := time.Parse(resyStartLayout, s.Date.Start)
			if err != nil {
				return nil, malformed(a.name, "%s.date.start %q: want YYYY-MM-DD HH:MM:SS", sat, clip.Marked(s.Date.Start, maxQuoted))
			}
			kind := ""
			if s.Config != nil {
				kind = s.Config.Type
				if err := checkText(a.name, sat+".config.type", kind, MaxAttrLen); err != nil {
					return nil, err
				}
			}
			if err := ents.add(venue, v.Venue.Name, start.Format(time.DateOnly), start.Format("15:04"), kind); err != nil {
				return nil, err
			}
		}
	}
	return ents.result(), nil
}
