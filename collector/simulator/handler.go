package simulator

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// Paths served.
const (
	// ResyPath is the Resy-style find endpoint (GET).
	ResyPath = "/4/find"
	// OpenTablePath is the OpenTable-style GraphQL endpoint (POST).
	OpenTablePath = "/dapi/fe/gql"
)

// maxRequestBody bounds a GraphQL request body.
const maxRequestBody = 64 << 10

// maxRestaurantIDs bounds the restaurantIds of one GraphQL request.
const maxRestaurantIDs = 100

// ServeHTTP answers GET /4/find and POST /dapi/fe/gql from the current
// model.
func (s *Simulator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	method, ok := map[string]string{ResyPath: http.MethodGet, OpenTablePath: http.MethodPost}[r.URL.Path]
	switch {
	case !ok:
		writeStatus(w, http.StatusNotFound)
	case r.Method != method:
		writeStatus(w, http.StatusMethodNotAllowed)
	case r.URL.Path == ResyPath:
		s.serveResy(w, r)
	default:
		s.serveOpenTable(w, r)
	}
}

// query is what a request asks for.
type query struct {
	venue string // "" for all
	date  string
	party int
	term  string
}

// answer writes a 400 for badParams, or the body built by build.
func (s *Simulator) answer(w http.ResponseWriter, badParams error, build func() any) {
	if badParams != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"status": http.StatusBadRequest, "message": badParams.Error()})
		return
	}
	writeJSON(w, http.StatusOK, build())
}

func writeStatus(w http.ResponseWriter, status int) {
	writeJSON(w, status, map[string]any{"status": status, "message": http.StatusText(status)})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func checkDateParty(date string, party int) error {
	if _, err := time.Parse(time.DateOnly, date); err != nil || len(date) != 10 {
		return fmt.Errorf("date %q: want YYYY-MM-DD", date)
	}
	if party < 1 || party > 50 {
		return fmt.Errorf("party size %d out of range 1..50", party)
	}
	return nil
}

func (s *Simulator) serveResy(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	req := query{venue: q.Get("venue_id"), date: q.Get("day"), term: q.Get("query")}
	req.party, _ = strconv.Atoi(q.Get("party_size"))
	bad := checkDateParty(req.date, req.party)
	if _, err := strconv.ParseInt(req.venue, 10, 64); bad == nil && req.venue != "" && err != nil {
		bad = fmt.Errorf("venue_id %q is not numeric", req.venue)
	}
	s.answer(w, bad, func() any { return s.resyBody(req) })
}

func (s *Simulator) resyBody(req query) resyFind {
	var out resyFind
	out.Results.Venues = []resyVenue{}
	out.Query.Day, out.Query.PartySize = req.date, req.party
	for _, vs := range s.lookup(req.venue, req.term, req.date, req.party) {
		v := resyVenue{Slots: []resySlot{}}
		v.Venue.ID.Resy, v.Venue.Name = vs.venue.ID, vs.venue.Name
		v.Venue.Location.TimeZone = "America/New_York"
		for _, sl := range vs.slots {
			start, _ := time.Parse("2006-01-02 15:04", sl.Date+" "+sl.Time)
			var rs resySlot
			rs.Config.ID = vs.venue.ID*100 + int64(len(v.Slots))
			rs.Config.Type = sl.Type
			rs.Config.Token = fmt.Sprintf("rgs://resy/%d/%d/%d/%s/%s/%s:00/%d/%s",
				vs.venue.ID, rs.Config.ID, sl.PartySize, sl.Date, sl.Date, sl.Time, sl.PartySize, sl.Type)
			rs.Date.Start = start.Format("2006-01-02 15:04:05")
			rs.Date.End = start.Add(2 * time.Hour).Format("2006-01-02 15:04:05")
			rs.Size.Min, rs.Size.Max = 1, max(sl.PartySize, 4)
			v.Slots = append(v.Slots, rs)
		}
		out.Results.Venues = append(out.Results.Venues, v)
	}
	return out
}

type resyFind struct {
	Query struct {
		Day       string `json:"day"`
		PartySize int    `json:"party_size"`
	} `json:"query"`
	Results struct {
		Venues []resyVenue `json:"venues"`
	} `json:"results"`
}

type resyVenue struct {
	Venue struct {
		ID struct {
			Resy int64 `json:"resy"`
		} `json:"id"`
		Name     string `json:"name"`
		Location struct {
			TimeZone string `json:"time_zone"`
		} `json:"location"`
	} `json:"venue"`
	Slots []resySlot `json:"slots"`
}

type resySlot struct {
	Config struct {
		ID    int64  `json:"id"`
		Type  string `json:"type"`
		Token string `json:"token"`
	} `json:"config"`
	Date struct {
		Start string `json:"start"`
		End   string `json:"end"`
	} `json:"date"`
	Size struct {
		Min int `json:"min"`
		Max int `json:"max"`
	} `json:"size"`
	Payment struct {
		IsPaid bool `json:"is_paid"`
	} `json:"payment"`
}

type gqlRequest struct {
	OperationName string `json:"operationName"`
	Variables     struct {
		RestaurantIDs []int64 `json:"restaurantIds"`
		Date          string  `json:"date"`
		PartySize     int     `json:"partySize"`
		Term          string  `json:"term"`
	} `json:"variables"`
}

func (s *Simulator) serveOpenTable(w http.ResponseWriter, r *http.Request) {
	var in gqlRequest
	bad := json.NewDecoder(io.LimitReader(r.Body, maxRequestBody)).Decode(&in)
	if bad != nil {
		bad = fmt.Errorf("request body: %w", bad)
	}
	q := r.URL.Query()
	if bad == nil && (q.Get("optype") != "query" || q.Get("opname") != "RestaurantsAvailability" ||
		in.OperationName != "RestaurantsAvailability") {
		bad = fmt.Errorf("unknown operation %q", in.OperationName)
	}
	v := in.Variables
	if bad == nil {
		bad = checkDateParty(v.Date, v.PartySize)
	}
	if bad == nil && len(v.RestaurantIDs) > maxRestaurantIDs {
		bad = fmt.Errorf("more than %d restaurantIds", maxRestaurantIDs)
	}
	s.answer(w, bad, func() any { return s.openTableBody(v.RestaurantIDs, v.Term, v.Date, v.PartySize) })
}

func (s *Simulator) openTableBody(ids []int64, term, date string, party int) any {
	type availability struct {
		Times []string `json:"times"`
	}
	type restaurant struct {
		RestaurantID int64         `json:"restaurantId"`
		Name         string        `json:"name"`
		Availability *availability `json:"availability"`
	}
	restaurants := []restaurant{}
	for _, vs := range s.lookup("", term, date, party) {
		if len(ids) > 0 && !slices.Contains(ids, vs.venue.ID) {
			continue
		}
		rest := restaurant{RestaurantID: vs.venue.ID, Name: vs.venue.Name}
		if len(vs.slots) > 0 {
			rest.Availability = &availability{Times: []string{}}
			for _, sl := range vs.slots {
				rest.Availability.Times = append(rest.Availability.Times, sl.Time)
			}
		}
		restaurants = append(restaurants, rest)
	}
	type results struct {
		Restaurants []restaurant `json:"restaurants"`
	}
	type search struct {
		Total   int     `json:"totalRestaurantCount"`
		Results results `json:"searchResults"`
	}
	type data struct {
		Search search `json:"restaurantSearchV2"`
	}
	return map[string]any{"data": data{Search: search{Total: len(restaurants), Results: results{restaurants}}}}
}
