package provider_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/collector/provider"
	"github.com/dropstream/dropstream/collector/simulator"
	"github.com/dropstream/dropstream/collector/simulator/simtest"
)

// fetch asks the server at base for scope through adapter a and returns the
// response body.
func fetch(t *testing.T, a provider.Adapter, base string, scope avail.Scope) []byte {
	t.Helper()
	req, err := a.NewRequest(context.Background(), base, scope)
	if err != nil {
		t.Fatalf("NewRequest: %v", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, avail.MaxRawBodySize+1))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("response: HTTP %d, %v: %s", resp.StatusCode, err, body)
	}
	return body
}

func keys(ents []avail.Entity) []string {
	out := []string{}
	for _, e := range ents {
		out = append(out, e.Key)
	}
	return out
}

func newSim(t *testing.T, cfg simulator.Config) (*simulator.Simulator, string) {
	t.Helper()
	sim, err := simulator.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	return sim, srv.URL
}

func TestAdapters_parseExactlyTheSimulatorsOpenSlots(t *testing.T) {
	sim, base := newSim(t, simulator.Config{Seed: 7, Venues: 6, SlotsPerVenue: 12, Churn: 0.2, Flap: 0.05})
	scopes := []struct {
		name  string
		scope avail.Scope
	}{
		{"one venue", avail.Scope{Venue: "1002", Date: "2026-11-21", PartySize: 2}},
		{"another venue, party of 4", avail.Scope{Venue: "1005", Date: "2026-11-22", PartySize: 4}},
		{"all venues", avail.Scope{Date: "2026-11-20", PartySize: 2}},
		{"name query", avail.Scope{Date: "2026-11-20", PartySize: 4, Query: "copper"}},
		{"a day without availability", avail.Scope{Date: "2027-01-01", PartySize: 2}},
		{"an unknown venue", avail.Scope{Venue: "9999", Date: "2026-11-21", PartySize: 2}},
	}
	seen := 0
	for _, name := range provider.Names() {
		a, err := provider.For(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, sc := range scopes {
			for _, restaurantLevel := range []bool{false, true} {
				t.Run(name+"/"+sc.name+map[bool]string{true: "/restaurant level"}[restaurantLevel], func(t *testing.T) {
					for tick := range 3 {
						ents, err := a.Parse(fetch(t, a, base, sc.scope), sc.scope, restaurantLevel)
						if err != nil {
							t.Fatalf("tick %d: Parse: %v", tick, err)
						}
						want := sim.Open(name, sc.scope)
						if restaurantLevel {
							want = simtest.OpenRestaurants(sim, name, sc.scope)
						}
						if got := keys(ents); !slices.Equal(got, want) {
							t.Fatalf("tick %d: keys\n got  %v\n want %v", tick, got, want)
						}
						checkEntities(t, name, sc.scope, restaurantLevel, ents)
						seen += len(ents)
						sim.Advance(1)
					}
				})
			}
		}
	}
	if seen < 100 {
		t.Errorf("only %d entities seen in all: the model is too empty to test anything", seen)
	}
}

// checkEntities checks that every entity agrees with its key.
func checkEntities(t *testing.T, name string, scope avail.Scope, restaurantLevel bool, ents []avail.Entity) {
	t.Helper()
	for _, e := range ents {
		parsed, err := avail.ParseKey(e.Key)
		if err != nil {
			t.Fatalf("entity key %q: %v", e.Key, err)
		}
		wantKind := avail.EntitySlot
		if restaurantLevel {
			wantKind = avail.EntityRestaurant
		}
		if e.Kind != wantKind || parsed.Kind != wantKind || e.Provider != name || e.Venue != parsed.Venue ||
			e.Date != parsed.Date || e.Time != parsed.Time || e.PartySize != scope.PartySize || e.VenueName == "" {
			t.Fatalf("entity %+v disagrees with its key %+v", e, parsed)
		}
	}
}

func TestAdapters_resySlotKeepsItsSeatingTypesAndMergesDuplicates(t *testing.T) {
	a, _ := provider.For(provider.Resy)
	body := `{"results":{"venues":[{"venue":{"id":{"resy":42},"name":"Lilt"},"slots":[
		{"config":{"type":"Patio","token":"rgs://x"},"date":{"start":"2026-11-22 19:30:00"},"size":{"min":2,"max":4}},
		{"config":{"type":"Bar"},"date":{"start":"2026-11-22 19:30:00"}},
		{"config":{"type":"Bar"},"date":{"start":"2026-11-22 19:30:00"}},
		{"date":{"start":"2026-11-23 00:15:00","end":"2026-11-23 02:15:00"}}]}]}}`
	scope := avail.Scope{Venue: "42", Date: "2026-11-22", PartySize: 2}
	ents, err := a.Parse([]byte(body), scope, false)
	if err != nil {
		t.Fatal(err)
	}
	want := []avail.Entity{
		{Key: "resy|42|2026-11-22|19:30|2", Kind: avail.EntitySlot, Provider: "resy", Venue: "42", VenueName: "Lilt",
			Date: "2026-11-22", Time: "19:30", PartySize: 2, Attrs: map[string]string{"type": "Bar,Patio"}},
		{Key: "resy|42|2026-11-23|00:15|2", Kind: avail.EntitySlot, Provider: "resy", Venue: "42", VenueName: "Lilt",
			Date: "2026-11-23", Time: "00:15", PartySize: 2},
	}
	if len(ents) != len(want) {
		t.Fatalf("got %d entities %+v, want %+v", len(ents), ents, want)
	}
	for i := range want {
		if ents[i].Key != want[i].Key || ents[i].Attrs["type"] != want[i].Attrs["type"] || ents[i].Time != want[i].Time {
			t.Errorf("entity %d = %+v, want %+v", i, ents[i], want[i])
		}
	}
	rl, err := a.Parse([]byte(body), scope, true)
	if err != nil || len(rl) != 2 || rl[0].Attrs["slots"] != "3" || rl[0].Key != "resy|42|2026-11-22|*|2" {
		t.Errorf("restaurant level = %+v, %v; want 2 venue-days, the first with 3 slots", rl, err)
	}
}

func TestAdapters_requestsCarryTheScope(t *testing.T) {
	scope := avail.Scope{Venue: "1001", Date: "2026-11-22", PartySize: 3, Query: "a b"}
	tests := []struct {
		provider, method, path string
		contains               []string
	}{
		{provider.Resy, http.MethodGet, "/prefix/4/find", []string{"venue_id=1001", "day=2026-11-22", "party_size=3", "query=a+b"}},
		{provider.OpenTable, http.MethodPost, "/prefix/dapi/fe/gql", []string{`"restaurantIds":[1001]`, `"date":"2026-11-22"`, `"partySize":3`, `"term":"a b"`, "opname=RestaurantsAvailability"}},
	}
	for _, tt := range tests {
		t.Run(tt.provider, func(t *testing.T) {
			a, _ := provider.For(tt.provider)
			req, err := a.NewRequest(context.Background(), "https://example.test/prefix/", scope)
			if err != nil {
				t.Fatal(err)
			}
			var body []byte
			if req.Body != nil {
				body, _ = io.ReadAll(req.Body)
			}
			all := req.URL.String() + " " + string(body)
			if req.Method != tt.method || req.URL.Path != tt.path || req.URL.Host != "example.test" {
				t.Errorf("request %s %s, want %s %s", req.Method, req.URL, tt.method, tt.path)
			}
			for _, s := range tt.contains {
				if !strings.Contains(all, s) {
					t.Errorf("request %q lacks %q", all, s)
				}
			}
		})
	}
}

func TestAdapters_rejectNonNumericVenues(t *testing.T) {
	for _, name := range provider.Names() {
		a, _ := provider.For(name)
		if err := a.ValidateScope(avail.Scope{Venue: "carbone", Date: "2026-11-22", PartySize: 2}); err == nil {
			t.Errorf("%s accepts venue \"carbone\"", name)
		}
		if err := a.ValidateScope(avail.Scope{Venue: "17", Date: "2026-11-22", PartySize: 2}); err != nil {
			t.Errorf("%s rejects venue 17: %v", name, err)
		}
	}
	if _, err := provider.For("yelp"); !errors.Is(err, provider.ErrUnknownProvider) {
		t.Errorf("For(yelp) = %v, want ErrUnknownProvider", err)
	}
}
