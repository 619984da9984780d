package simulator

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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
// model, after injected failures and the bearer-token check.
func (s *Simulator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case ResyPath:
		if r.Method != http.MethodGet {
			writeStatus(w, http.StatusMethodNotAllowed)
			return
		}
		s.serveResy(w, r)
	case OpenTablePath:
		if r.Method != http.MethodPost {
			writeStatus(w, http.StatusMethodNotAllowed)
			return
		}
		s.serveOpenTable(w, r)
	default:
		writeStatus(w, http.StatusNotFound)
	}
}

// answer writes an injected failure, a 401, a 400 for badParams, or the body
// built by build, and records the request.
func (s *Simulator) answer(w http.ResponseWriter, r *http.Request, req Request, badParams error, build func() any) {
	req.Authorization = r.Header.Get("Authorization")
	req.UserAgent = r.Header.Get("User-Agent")
	defer func() { s.record(req) }()
	if f := s.failure(req.Endpoint, req.Venue); f != nil {
		req.Injected = true
		req.Status = writeFailure(w, f)
		return
	}
	if !s.authorized(req.Authorization) {
		req.Status = writeStatus(w, http.StatusUnauthorized)
		return
	}
	if badParams != nil {
		req.Status = http.StatusBadRequest
		writeJSON(w, req.Status, map[string]any{"status": req.Status, "message": badParams.Error()})
		return
	}
	req.Status = http.StatusOK
	writeJSON(w, req.Status, build())
}

func writeFailure(w http.ResponseWriter, f *Failure) int {
	switch f.Mode {
	case FailThrottle:
		switch f.RetryAfter {
		case "":
			w.Header().Set("Retry-After", "1")
		case "-":
		default:
			w.Header().Set("Retry-After", f.RetryAfter)
		}
		return writeStatus(w, http.StatusTooManyRequests)
	case FailUnauthorized:
		return writeStatus(w, http.StatusUnauthorized)
	case FailForbidden:
		return writeStatus(w, http.StatusForbidden)
	case FailMalformed:
		body := f.Body
		body = cmp.Or(body, DefaultMalformedBody)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, body)
		return http.StatusOK
	default:
		return writeStatus(w, http.StatusInternalServerError)
	}
}

func writeStatus(w http.ResponseWriter, status int) int {
	writeJSON(w, status, map[string]any{"status": status, "message": http.StatusText(status)})
	return status
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
	req := Request{Endpoint: EndpointResy, Venue: q.Get("venue_id"), Date: q.Get("day"), Query: q.Get("query")}
	party, err := strconv.Atoi(q.Get("party_size"))
	if err != nil {
		party = 0
	}
	req.PartySize = party
	bad := checkDateParty(req.Date, party)
	if _, err := strconv.ParseInt(req.Venue, 10, 64); bad == nil && req.Venue != "" && err != nil {
		bad = fmt.Errorf("venue_id %q is not numeric", req.Venue)
	}
	s.answer(w, r, req, bad, func() any { return s.resyBody(req) })
}

func (s *Simulator) resyBody(req Request) resyFind {
	var out resyFind
	out.Results.Venues = []resyVenue{}
	out.Query.Day, out.Query.PartySize = req.Date, req.PartySize
	for _, vs := range s.lookup(req.Venue, req.Query, req.Date, req.PartySize) {
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
		Time          string  `json:"time"`
		PartySize     int     `json:"partySize"`
		Term          string  `json:"term"`
	} `json:"variables"`
	Query string `json:"query"`
}

func (s *Simulator) serveOpenTable(w http.ResponseWriter, r *http.Request) {
	req := Request{Endpoint: EndpointOpenTable}
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
	req.Date, req.PartySize, req.Query = v.Date, v.PartySize, v.Term
	if len(v.RestaurantIDs) == 1 {
		req.Venue = strconv.FormatInt(v.RestaurantIDs[0], 10)
	}
	if bad == nil {
		bad = checkDateParty(v.Date, v.PartySize)
	}
	if bad == nil && len(v.RestaurantIDs) > maxRestaurantIDs {
		bad = fmt.Errorf("more than %d restaurantIds", maxRestaurantIDs)
	}
	s.answer(w, r, req, bad, func() any { return s.openTableBody(v.RestaurantIDs, v.Term, v.Date, v.PartySize) })
}

func (s *Simulator) openTableBody(ids []int64, term, date string, party int) any {
	want := make(map[int64]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
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
		if len(ids) > 0 && !want[vs.venue.ID] {
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
