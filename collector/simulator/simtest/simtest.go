// Package simtest wraps a simulator for tests: it injects failures into
// its answers and logs the requests it answers.
package simtest

import (
	"bytes"
	"cmp"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/collector/simulator"
)

// Endpoint names one of the simulator's APIs.
type Endpoint string

// Endpoints.
const (
	// EndpointAny matches both APIs in a Failure.
	EndpointAny Endpoint = ""
	// EndpointResy is GET /4/find.
	EndpointResy Endpoint = "resy"
	// EndpointOpenTable is POST /dapi/fe/gql.
	EndpointOpenTable Endpoint = "opentable"
)

// FailureMode is how an injected failure answers.
type FailureMode int

// Failure modes.
const (
	// FailServerError answers 500.
	FailServerError FailureMode = iota + 1
	// FailThrottle answers 429 with the Failure's Retry-After header.
	FailThrottle
	// FailUnauthorized answers 401, as for an expired token.
	FailUnauthorized
	// FailForbidden answers 403.
	FailForbidden
	// FailMalformed answers 200 with a body that is not a valid response.
	FailMalformed
)

// DefaultMalformedBody is the body of FailMalformed when Failure.Body is
// empty: truncated JSON.
const DefaultMalformedBody = `{"results":{"venues":[{"venue":{"id":{"resy":`

// Failure makes matching requests fail. A request matches when its endpoint
// and venue match (empty fields match anything).
type Failure struct {
	// Mode is how the request is answered. Required.
	Mode FailureMode
	// Endpoint restricts the failure to one API. Default EndpointAny.
	Endpoint Endpoint
	// Venue restricts the failure to requests for one venue id (the Resy
	// venue_id or the OpenTable restaurantIds). Default: any request.
	Venue string
	// Times is how many matching requests fail. Default 0: every one, until
	// ClearFailures.
	Times int
	// RetryAfter is the Retry-After header of FailThrottle, in seconds or
	// as an HTTP date. Default "1"; "-" sends none.
	RetryAfter string
	// Body replaces DefaultMalformedBody for FailMalformed.
	Body string
}

// maxRequests bounds the request log; older entries are dropped.
const maxRequests = 10000

// Request is one request the simulator answered.
type Request struct {
	Endpoint  Endpoint
	Venue     string // venue asked for; "" for all
	Date      string
	PartySize int
	Query     string
	// Authorization is the request's Authorization header.
	Authorization string
	UserAgent     string
	// Status is the HTTP status of the answer.
	Status int
	// Injected reports an answer made by an injected Failure.
	Injected bool
}

// Sim is a simulator whose HTTP handler injects failures and logs the
// requests to its endpoints. It is safe for concurrent use.
type Sim struct {
	*simulator.Simulator

	mu       sync.Mutex
	failures []*Failure
	requests []Request
	token    string
}

// New returns simulator.New(cfg), wrapped.
func New(cfg simulator.Config) (*Sim, error) {
	s, err := simulator.New(cfg)
	if err != nil {
		return nil, err
	}
	return &Sim{Simulator: s}, nil
}

// Fail adds a failure rule. Rules are tried in the order they were added;
// the first that matches, and has requests left to fail, answers.
func (s *Sim) Fail(f Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, &f)
}

// ClearFailures removes every failure rule.
func (s *Sim) ClearFailures() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = nil
}

// Requests returns the requests answered so far (the last 10000), oldest
// first.
func (s *Sim) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// SetToken sets the bearer token requests must carry ("": none, the
// default); others get 401.
func (s *Sim) SetToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.token = token
}

// ResetRequests empties the request log.
func (s *Sim) ResetRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
}

// ServeHTTP answers as the simulator does, after injected failures and
// the token check, and logs the requests to its two endpoints.
func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, ok := parse(r)
	if !ok {
		s.Simulator.ServeHTTP(w, r)
		return
	}
	req.Authorization = r.Header.Get("Authorization")
	req.UserAgent = r.Header.Get("User-Agent")
	if f := s.failure(req.Endpoint, req.Venue); f != nil {
		req.Injected = true
		req.Status = writeFailure(w, f)
	} else if !s.authorized(req.Authorization) {
		req.Status = writeStatus(w, http.StatusUnauthorized)
	} else {
		sw := &statusWriter{ResponseWriter: w}
		s.Simulator.ServeHTTP(sw, r)
		req.Status = sw.status
	}
	s.record(req)
}

// parse returns what r asks of an endpoint, false for another path or
// method. r's body can be read again.
func parse(r *http.Request) (Request, bool) {
	q := r.URL.Query()
	switch {
	case r.URL.Path == simulator.ResyPath && r.Method == http.MethodGet:
		party, _ := strconv.Atoi(q.Get("party_size"))
		return Request{Endpoint: EndpointResy, Venue: q.Get("venue_id"), Date: q.Get("day"), PartySize: party,
			Query: q.Get("query")}, true
	case r.URL.Path == simulator.OpenTablePath && r.Method == http.MethodPost:
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var in struct {
			Variables struct {
				RestaurantIDs []int64 `json:"restaurantIds"`
				Date          string  `json:"date"`
				PartySize     int     `json:"partySize"`
				Term          string  `json:"term"`
			} `json:"variables"`
		}
		_ = json.Unmarshal(body, &in)
		v := in.Variables
		req := Request{Endpoint: EndpointOpenTable, Date: v.Date, PartySize: v.PartySize, Query: v.Term}
		if len(v.RestaurantIDs) == 1 {
			req.Venue = strconv.FormatInt(v.RestaurantIDs[0], 10)
		}
		return req, true
	}
	return Request{}, false
}

// failure returns the failure rule answering a request, consuming one of
// its Times, or nil.
func (s *Sim) failure(ep Endpoint, venue string) *Failure {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range s.failures {
		if (f.Endpoint != EndpointAny && f.Endpoint != ep) || (f.Venue != "" && f.Venue != venue) {
			continue
		}
		if f.Times > 0 {
			f.Times--
			if f.Times == 0 {
				s.failures = slices.Delete(slices.Clone(s.failures), i, i+1)
			}
		}
		out := *f
		return &out
	}
	return nil
}

// record appends a request to the log.
func (s *Sim) record(r Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.requests) >= maxRequests {
		s.requests = slices.Delete(s.requests, 0, 1)
	}
	s.requests = append(s.requests, r)
}

// authorized reports whether an Authorization header carries the token.
func (s *Sim) authorized(header string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.token == "" || header == "Bearer "+s.token
}

// writeFailure answers as f says and returns the status written.
func writeFailure(w http.ResponseWriter, f *Failure) int {
	w.Header().Set("Content-Type", "application/json")
	status := http.StatusInternalServerError
	switch f.Mode {
	case FailThrottle:
		switch f.RetryAfter {
		case "":
			w.Header().Set("Retry-After", "1")
		case "-":
		default:
			w.Header().Set("Retry-After", f.RetryAfter)
		}
		status = http.StatusTooManyRequests
	case FailUnauthorized:
		status = http.StatusUnauthorized
	case FailForbidden:
		status = http.StatusForbidden
	case FailMalformed:
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, cmp.Or(f.Body, DefaultMalformedBody))
		return http.StatusOK
	}
	return writeStatus(w, status)
}

// writeStatus answers status as the simulator does.
func writeStatus(w http.ResponseWriter, status int) int {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"status": status, "message": http.StatusText(status)})
	return status
}

// statusWriter remembers the status written through it.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}

// OpenRestaurants returns the restaurant-level keys (avail.RestaurantKey)
// of the venues with at least one slot open now in scope, sorted.
func OpenRestaurants(s *simulator.Simulator, provider string, scope avail.Scope) []string {
	keys := []string{}
	for _, sl := range s.OpenSlots(scope) {
		keys = append(keys, avail.RestaurantKey(provider, strconv.FormatInt(sl.Venue.ID, 10), scope.Date, scope.PartySize))
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}
