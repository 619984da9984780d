package provider

import (
	"bytes"
	"context"
	"encoding/json"
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
	q := url.Values{"lat": {"0"}, "long": {"0"}, "day": {scope.Date}, "party_size": {strconv.Itoa(scope.PartySize)}}
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

// OpenTableOperation is the GraphQL operation the OpenTable adapter sends.
const OpenTableOperation = "RestaurantsAvailability"

// openTableQuery is the GraphQL document sent with every request.
const openTableQuery = `query RestaurantsAvailability($restaurantIds: [Int!], $date: String!, $time: String!, $partySize: Int!, $term: String) {
  restaurantSearchV2(restaurantIds: $restaurantIds, date: $date, time: $time, partySize: $partySize, term: $term) {
    totalRestaurantCount
    searchResults { restaurants { restaurantId name availability { times } } }
  }
}`

// openTableSearchTime is the time of day the search is centred on; the
// provider answers with the times around it.
const openTableSearchTime = "19:00"

// openTableAdapter speaks the OpenTable-style GraphQL API:
//
//	POST {base}/dapi/fe/gql?optype=query&opname=RestaurantsAvailability
//	{"variables": {"restaurantIds": [123], "date": "2026-11-22", "time": "19:00", "partySize": 2}, ...}
//	→ {"data": {"restaurantSearchV2": {"searchResults": {"restaurants": [
//	   {"restaurantId": 123, "name": "...", "availability": {"times": ["19:30"]}}]}}}}
//
// Restaurants and their ids are required; times are "HH:MM" on the scope's
// date. A response with GraphQL "errors" is malformed.
type openTableAdapter struct{}

func (openTableAdapter) Name() string { return OpenTable }

func (openTableAdapter) ValidateScope(scope avail.Scope) error { return numericVenue(OpenTable, scope) }

type openTableRequest struct {
	OperationName string             `json:"operationName"`
	Variables     openTableVariables `json:"variables"`
	Query         string             `json:"query"`
}

type openTableVariables struct {
	RestaurantIDs []int64 `json:"restaurantIds,omitempty"`
	Date          string  `json:"date"`
	Time          string  `json:"time"`
	PartySize     int     `json:"partySize"`
	Term          string  `json:"term,omitempty"`
}

func (a openTableAdapter) NewRequest(ctx context.Context, base string, scope avail.Scope) (*http.Request, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("%s: base URL: %w", OpenTable, err)
	}
	u = u.JoinPath("dapi", "fe", "gql")
	u.RawQuery = url.Values{"optype": {"query"}, "opname": {OpenTableOperation}}.Encode()
	vars := openTableVariables{Date: scope.Date, Time: openTableSearchTime, PartySize: scope.PartySize, Term: scope.Query}
	if scope.Venue != "" {
		id, err := strconv.ParseInt(scope.Venue, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", OpenTable, a.ValidateScope(scope))
		}
		vars.RestaurantIDs = []int64{id}
	}
	body, err := json.Marshal(openTableRequest{OperationName: OpenTableOperation, Variables: vars, Query: openTableQuery})
	if err != nil {
		return nil, fmt.Errorf("%s: encode request: %w", OpenTable, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", OpenTable, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	return req, nil
}

type openTableResponse struct {
	Data *struct {
		Search *struct {
			Results *struct {
				Restaurants *[]openTableRestaurant `json:"restaurants"`
			} `json:"searchResults"`
		} `json:"restaurantSearchV2"`
	} `json:"data"`
	Errors []struct {
		Message string `json:"message"`
	} `json:"errors"`
}

type openTableRestaurant struct {
	RestaurantID *int64 `json:"restaurantId"`
	Name         string `json:"name"`
	Availability *struct {
		Times *[]string `json:"times"`
	} `json:"availability"`
}

func (openTableAdapter) Parse(body []byte, scope avail.Scope, restaurantLevel bool) ([]avail.Entity, error) {
	var r openTableResponse
	if err := decodeJSON(OpenTable, body, &r); err != nil {
		return nil, err
	}
	if len(r.Errors) > 0 {
		return nil, malformed(OpenTable, "GraphQL errors (%d), first: %q", len(r.Errors), clip.Marked(r.Errors[0].Message, maxQuoted))
	}
	if r.Data == nil || r.Data.Search == nil || r.Data.Search.Results == nil || r.Data.Search.Results.Restaurants == nil {
		return nil, malformed(OpenTable, "data.restaurantSearchV2.searchResults.restaurants is missing")
	}
	restaurants := *r.Data.Search.Results.Restaurants
	if len(restaurants) > MaxVenues {
		return nil, malformed(OpenTable, "%d restaurants exceed %d", len(restaurants), MaxVenues)
	}
	ents := newEntities(OpenTable, scope, restaurantLevel)
	for i, rest := range restaurants {
		at := fmt.Sprintf("restaurants[%d]", i)
		venue, err := venueID(OpenTable, at+".restaurantId", rest.RestaurantID)
		if err != nil {
			return nil, err
		}
		if err := checkText(OpenTable, at+".name", rest.Name, avail.MaxFieldLen); err != nil {
			return nil, err
		}
		if rest.Availability == nil {
			continue
		}
		if rest.Availability.Times == nil {
			return nil, malformed(OpenTable, "%s.availability.times is missing", at)
		}
		times := *rest.Availability.Times
		if len(times) > MaxSlotsPerVenue {
			return nil, malformed(OpenTable, "%s has %d times, more than %d", at, len(times), MaxSlotsPerVenue)
		}
		for j, t := range times {
			if !parseHHMM(t) {
				return nil, malformed(OpenTable, "%s.availability.times[%d] %q: want HH:MM", at, j, clip.Marked(t, maxQuoted))
			}
			if err := ents.add(venue, rest.Name, scope.Date, t, ""); err != nil {
				return nil, err
			}
		}
	}
	return ents.result(), nil
}
