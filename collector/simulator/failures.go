package simulator

import (
	"slices"
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
	// Tick is the model's tick when the request was answered.
	Tick int
	// Injected reports an answer made by an injected Failure.
	Injected bool
}

// Fail adds a failure rule. Rules are tried in the order they were added;
// the first that matches, and has requests left to fail, answers.
func (s *Simulator) Fail(f Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, &f)
}

// ClearFailures removes every failure rule.
func (s *Simulator) ClearFailures() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = nil
}

// Requests returns the requests answered so far (the last 10000), oldest
// first.
func (s *Simulator) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// ResetRequests empties the request log.
func (s *Simulator) ResetRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
}

// failure returns the failure rule answering a request, consuming one of
// its Times, or nil.
func (s *Simulator) failure(ep Endpoint, venue string) *Failure {
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
func (s *Simulator) record(r Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r.Tick = s.ticks
	if len(s.requests) >= maxRequests {
		s.requests = slices.Delete(s.requests, 0, 1)
	}
	s.requests = append(s.requests, r)
}

// authorized reports whether an Authorization header carries the token.
func (s *Simulator) authorized(header string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.token == "" || header == "Bearer "+s.token
}
