package simulator_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/collector/simulator"
	"github.com/dropstream/dropstream/collector/simulator/simtest"
)

func newSim(t *testing.T, cfg simulator.Config) *simulator.Simulator {
	t.Helper()
	sim, err := simulator.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return sim
}

// allOpen returns every open slot key of the model.
func allOpen(sim *simulator.Simulator) []string {
	var out []string
	cfg := sim.Config()
	for _, d := range cfg.Dates {
		for _, p := range cfg.PartySizes {
			out = append(out, sim.Open("sim", avail.Scope{Date: d, PartySize: p})...)
		}
	}
	slices.Sort(out)
	return out
}

// flips counts keys open in exactly one of a and b.
func flips(a, b []string) int {
	in := map[string]int{}
	for _, k := range a {
		in[k]++
	}
	for _, k := range b {
		in[k]++
	}
	n := 0
	for _, c := range in {
		if c == 1 {
			n++
		}
	}
	return n
}

func TestSimulator_sameSeedSameWorld(t *testing.T) {
	cfg := simulator.Config{Seed: 11, Venues: 5, Churn: 0.1, Flap: 0.1}
	a, b := newSim(t, cfg), newSim(t, cfg)
	other := newSim(t, simulator.Config{Seed: 12, Venues: 5, Churn: 0.1, Flap: 0.1})
	for tick := range 5 {
		if !slices.Equal(allOpen(a), allOpen(b)) {
			t.Fatalf("tick %d: two simulators with one seed differ", tick)
		}
		a.Advance(1)
		b.Advance(1)
	}
	if slices.Equal(allOpen(a), allOpen(other)) {
		t.Error("seeds 11 and 12 give the same world")
	}
}

func TestSimulator_tickFlipsExactlyChurnPlusFlapping(t *testing.T) {
	tests := []struct {
		name        string
		churn, flap float64
	}{
		{"static", 0, 0},
		{"churn only", 0.1, 0},
		{"flap only", 0, 0.05},
		{"both", 0.25, 0.1},
		{"everything flips", 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim := newSim(t, simulator.Config{Seed: 5, Venues: 10, SlotsPerVenue: 10, Churn: tt.churn, Flap: tt.flap})
			total := 10 * 3 * 2 * 10
			flapping := int(tt.flap*float64(total) + 0.5)
			churned := int(tt.churn*float64(total-flapping) + 0.5)
			before := allOpen(sim)
			for range 4 {
				sim.Advance(1)
				after := allOpen(sim)
				// Churned and flapping slots are disjoint: flips add up.
				if got := flips(before, after); got != churned+flapping {
					t.Fatalf("%d slots flipped, want %d churned + %d flapping", got, churned, flapping)
				}
				before = after
			}
		})
	}
}

func TestSimulator_flappingSlotsComeBackEveryOtherTick(t *testing.T) {
	sim := newSim(t, simulator.Config{Seed: 2, Flap: 0.2})
	t0 := allOpen(sim)
	sim.Advance(2)
	if !slices.Equal(t0, allOpen(sim)) {
		t.Error("with flapping only, tick 2 differs from tick 0")
	}
}

func TestSimulator_injectedFailuresAnswerMatchingRequests(t *testing.T) {
	sim, err := simtest.New(simulator.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	defer srv.Close()
	resy := func(venue string) *http.Response {
		resp, err := http.Get(srv.URL + "/4/find?day=2026-11-21&party_size=2&venue_id=" + venue)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	sim.Fail(simtest.Failure{Mode: simtest.FailThrottle, Venue: "1001", Times: 2, RetryAfter: "7"})
	sim.Fail(simtest.Failure{Mode: simtest.FailMalformed, Endpoint: simtest.EndpointResy, Venue: "1002", Times: 1})
	sim.Fail(simtest.Failure{Mode: simtest.FailServerError, Endpoint: simtest.EndpointOpenTable})
	tests := []struct {
		venue      string
		status     int
		retryAfter string
		body       string
	}{
		{"1001", 429, "7", ""},
		{"1002", 200, "", simtest.DefaultMalformedBody},
		{"1001", 429, "7", ""},
		{"1001", 200, "", ""},
		{"1002", 200, "", ""},
	}
	for i, tt := range tests {
		resp := resy(tt.venue)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.status || resp.Header.Get("Retry-After") != tt.retryAfter {
			t.Errorf("request %d: HTTP %d Retry-After %q, want %d %q", i, resp.StatusCode, resp.Header.Get("Retry-After"), tt.status, tt.retryAfter)
		}
		if tt.body != "" && string(body) != tt.body {
			t.Errorf("request %d: body %q, want %q", i, body, tt.body)
		}
		if tt.status == 200 && tt.body == "" && !json.Valid(body) {
			t.Errorf("request %d: invalid JSON %q", i, body)
		}
	}
	resp, err := http.Post(srv.URL+"/dapi/fe/gql?optype=query&opname=RestaurantsAvailability", "application/json",
		strings.NewReader(`{"operationName":"RestaurantsAvailability","variables":{"date":"2026-11-21","partySize":2}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 500 {
		t.Errorf("OpenTable answered %d, want the injected 500", resp.StatusCode)
	}
	sim.ClearFailures()
	reqs := sim.Requests()
	if len(reqs) != 6 || !reqs[0].Injected || reqs[0].Status != 429 || reqs[3].Injected || reqs[5].Endpoint != simtest.EndpointOpenTable {
		t.Errorf("request log %+v does not match the requests", reqs)
	}
}

func TestSimulator_tokenAndParameters(t *testing.T) {
	sim, err := simtest.New(simulator.Config{})
	if err != nil {
		t.Fatal(err)
	}
	sim.SetToken("s3cret")
	srv := httptest.NewServer(sim)
	defer srv.Close()
	tests := []struct {
		name, method, path, auth, body string
		status                         int
	}{
		{"no token", "GET", "/4/find?day=2026-11-21&party_size=2", "", "", 401},
		{"wrong token", "GET", "/4/find?day=2026-11-21&party_size=2", "Bearer nope", "", 401},
		{"right token", "GET", "/4/find?day=2026-11-21&party_size=2", "Bearer s3cret", "", 200},
		{"bad day", "GET", "/4/find?day=21-11-2026&party_size=2", "Bearer s3cret", "", 400},
		{"bad party", "GET", "/4/find?day=2026-11-21&party_size=0", "Bearer s3cret", "", 400},
		{"bad venue", "GET", "/4/find?day=2026-11-21&party_size=2&venue_id=x", "Bearer s3cret", "", 400},
		{"wrong method", "POST", "/4/find", "Bearer s3cret", "", 405},
		{"unknown path", "GET", "/3/venue", "Bearer s3cret", "", 404},
		{"gql ok", "POST", "/dapi/fe/gql?optype=query&opname=RestaurantsAvailability", "Bearer s3cret",
			`{"operationName":"RestaurantsAvailability","variables":{"date":"2026-11-21","partySize":2,"restaurantIds":[1001]}}`, 200},
		{"gql other operation", "POST", "/dapi/fe/gql?optype=query&opname=Autocomplete", "Bearer s3cret",
			`{"operationName":"Autocomplete","variables":{"date":"2026-11-21","partySize":2}}`, 400},
		{"gql not JSON", "POST", "/dapi/fe/gql?optype=query&opname=RestaurantsAvailability", "Bearer s3cret", `{`, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, srv.URL+tt.path, strings.NewReader(tt.body))
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Errorf("HTTP %d, want %d", resp.StatusCode, tt.status)
			}
		})
	}
	sim.SetToken("rotated")
	req, _ := http.NewRequest("GET", srv.URL+"/4/find?day=2026-11-21&party_size=2", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("old token after SetToken: HTTP %d, want 401", resp.StatusCode)
	}
}

func TestSimulator_startServesUntilContextEnds(t *testing.T) {
	sim := newSim(t, simulator.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	base, err := sim.Start(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(base + "/4/find?day=2026-11-21&party_size=2&venue_id=1001")
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Results struct {
			Venues []struct {
				Slots []json.RawMessage `json:"slots"`
			} `json:"venues"`
		} `json:"results"`
	}
	err = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	want := len(sim.Open("resy", avail.Scope{Venue: "1001", Date: "2026-11-21", PartySize: 2}))
	if err != nil || len(out.Results.Venues) != 1 || len(out.Results.Venues[0].Slots) != want {
		t.Errorf("answer %+v, %v; want one venue with %d slots", out, err, want)
	}
	cancel()
}

func TestConfig_validateRejectsOutOfRange(t *testing.T) {
	tests := []struct {
		name string
		cfg  simulator.Config
	}{
		{"too many venues", simulator.Config{Venues: simulator.MaxVenues + 1}},
		{"bad date", simulator.Config{Dates: []string{"2026-13-01"}}},
		{"duplicate dates", simulator.Config{Dates: []string{"2026-11-01", "2026-11-01"}}},
		{"party zero", simulator.Config{PartySizes: []int{0}}},
		{"too many slots", simulator.Config{SlotsPerVenue: simulator.MaxSlotsPerVenue + 1}},
		{"open fraction above 1", simulator.Config{OpenFraction: 1.5}},
		{"negative churn", simulator.Config{Churn: -0.1}},
		{"flap above 1", simulator.Config{Flap: 2}},
		{"negative auto tick", simulator.Config{AutoTick: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := simulator.New(tt.cfg); err == nil {
				t.Error("New accepted the config")
			}
		})
	}
	if err := (simulator.Config{}).Validate(); err != nil {
		t.Errorf("zero config: %v", err)
	}
}
