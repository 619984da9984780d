package provider_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/collector/provider"
	"github.com/dropstream/dropstream/collector/simulator"
)

// simBody returns a simulator answer to req, as fuzz seed.
func simBody(f *testing.F, req *http.Request) []byte {
	f.Helper()
	sim, err := simulator.New(simulator.Config{Seed: 3, SlotsPerVenue: 6})
	if err != nil {
		f.Fatal(err)
	}
	rec := httptest.NewRecorder()
	sim.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		f.Fatalf("simulator answered %d: %s", rec.Code, rec.Body)
	}
	return rec.Body.Bytes()
}

// checkParse is the property of every decoder: it never panics, fails only
// with ErrMalformed, and succeeds only with valid, sorted, distinct
// entities of the scope.
func checkParse(t *testing.T, name string, body []byte, restaurantLevel bool) {
	a, err := provider.For(name)
	if err != nil {
		t.Fatal(err)
	}
	sc := avail.Scope{Date: "2026-11-21", PartySize: 2}
	ents, err := a.Parse(body, sc, restaurantLevel)
	if err != nil {
		if !errors.Is(err, provider.ErrMalformed) || ents != nil {
			t.Fatalf("Parse = %v, %v; want nil and ErrMalformed", ents, err)
		}
		return
	}
	if len(ents) > avail.MaxEntities {
		t.Fatalf("%d entities exceed %d", len(ents), avail.MaxEntities)
	}
	if !slices.IsSortedFunc(ents, func(a, b avail.Entity) int { return strings.Compare(a.Key, b.Key) }) {
		t.Fatal("entities are not sorted by key")
	}
	for i, e := range ents {
		if i > 0 && ents[i-1].Key == e.Key {
			t.Fatalf("duplicate key %q", e.Key)
		}
		p, err := avail.ParseKey(e.Key)
		if err != nil || p.Provider != name || p.Venue != e.Venue || p.PartySize != 2 || len(e.VenueName) > avail.MaxFieldLen {
			t.Fatalf("entity %+v: key parses to %+v, %v", e, p, err)
		}
	}
}

func FuzzResyParse(f *testing.F) {
	f.Add(simBody(f, httptest.NewRequest(http.MethodGet, "/4/find?day=2026-11-21&party_size=2", nil)), false)
	f.Add([]byte(`{"results":{"venues":[{"venue":{"id":{"resy":1},"name":"a"},"slots":[{"config":{"type":"Bar"},"date":{"start":"2026-11-21 19:30:00"}}]}]}}`), true)
	f.Add([]byte(`{"results":{"venues":[{"venue":{"id":{"resy":`), false)
	f.Add([]byte(`{"results":{"venues":null}}`), false)
	f.Fuzz(func(t *testing.T, body []byte, restaurantLevel bool) {
		checkParse(t, provider.Resy, body, restaurantLevel)
	})
}

func FuzzOpenTableParse(f *testing.F) {
	gql := `{"operationName":"RestaurantsAvailability","variables":{"date":"2026-11-21","time":"19:00","partySize":2}}`
	f.Add(simBody(f, httptest.NewRequest(http.MethodPost, "/dapi/fe/gql?optype=query&opname=RestaurantsAvailability", strings.NewReader(gql))), false)
	f.Add([]byte(`{"data":{"restaurantSearchV2":{"searchResults":{"restaurants":[{"restaurantId":3,"name":"x","availability":{"times":["19:30","19:30"]}}]}}}}`), true)
	f.Add([]byte(`{"data":null,"errors":[{"message":"boom"}]}`), false)
	f.Add([]byte(`{"data":{"restaurantSearchV2":{"searchResults":{"restaurants":[{"restaurantId":3,"availability":{"times":["9:30"]}}]}}}}`), false)
	f.Fuzz(func(t *testing.T, body []byte, restaurantLevel bool) {
		checkParse(t, provider.OpenTable, body, restaurantLevel)
	})
}
