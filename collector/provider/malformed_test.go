package provider_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/collector/provider"
)

var scope = avail.Scope{Venue: "42", Date: "2026-11-22", PartySize: 2}

func TestResy_malformedBodiesAreErrMalformed(t *testing.T) {
	slot := func(start string) string {
		return `{"results":{"venues":[{"venue":{"id":{"resy":42},"name":"x"},"slots":[{"date":{"start":"` + start + `"}}]}]}}`
	}
	tests := []struct {
		name, body, reason string
	}{
		{"empty", ``, "empty body"},
		{"not JSON", `<html>Access Denied</html>`, "invalid JSON"},
		{"truncated", `{"results":{"venues":[{"venue":{"id":{"resy":`, "invalid JSON"},
		{"trailing data", `{"results":{"venues":[]}} {}`, "data after"},
		{"no results", `{"query":{}}`, "results.venues is missing"},
		{"null venues", `{"results":{"venues":null}}`, "results.venues is missing"},
		{"venues not a list", `{"results":{"venues":{}}}`, "invalid JSON"},
		{"venue without id", `{"results":{"venues":[{"venue":{"name":"x"},"slots":[]}]}}`, "venue.id is missing"},
		{"id without resy", `{"results":{"venues":[{"venue":{"id":{}},"slots":[]}]}}`, "id.resy is missing"},
		{"string id", `{"results":{"venues":[{"venue":{"id":{"resy":"42"}},"slots":[]}]}}`, "invalid JSON"},
		{"zero id", `{"results":{"venues":[{"venue":{"id":{"resy":0}},"slots":[]}]}}`, "not a positive id"},
		{"fractional id", `{"results":{"venues":[{"venue":{"id":{"resy":4.2}},"slots":[]}]}}`, "invalid JSON"},
		{"slot without date", `{"results":{"venues":[{"venue":{"id":{"resy":42}},"slots":[{"config":{}}]}]}}`, "date is missing"},
		{"ISO start", slot("2026-11-22T19:30:00Z"), "want YYYY-MM-DD HH:MM:SS"},
		{"start without seconds", slot("2026-11-22 19:30"), "want YYYY-MM-DD HH:MM:SS"},
		{"impossible time", slot("2026-11-22 25:30:00"), "want YYYY-MM-DD HH:MM:SS"},
		{"name too long", `{"results":{"venues":[{"venue":{"id":{"resy":42},"name":"` + strings.Repeat("n", 200) + `"},"slots":[]}]}}`, "longer than"},
		{"name with newline", `{"results":{"venues":[{"venue":{"id":{"resy":42},"name":"a\nb"},"slots":[]}]}}`, "control character"},
		{"too many slots", `{"results":{"venues":[{"venue":{"id":{"resy":42}},"slots":[` + strings.Repeat(`{"date":{"start":"2026-11-22 19:30:00"}},`, provider.MaxSlotsPerVenue) + `{"date":{"start":"2026-11-22 19:30:00"}}]}]}}`, "more than"},
		{"body too large", `{"results":{"venues":[]},"pad":"` + strings.Repeat("x", avail.MaxRawBodySize) + `"}`, "exceeds"},
	}
	a, _ := provider.For(provider.Resy)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ents, err := a.Parse([]byte(tt.body), scope, false)
			if !errors.Is(err, provider.ErrMalformed) || ents != nil {
				t.Fatalf("Parse = %v, %v; want nil and ErrMalformed", ents, err)
			}
			if !strings.Contains(err.Error(), tt.reason) || !strings.Contains(err.Error(), "resy:") {
				t.Errorf("error %q does not name the provider and say %q", err, tt.reason)
			}
		})
	}
}

func TestOpenTable_malformedBodiesAreErrMalformed(t *testing.T) {
	wrap := func(restaurants string) string {
		return `{"data":{"restaurantSearchV2":{"searchResults":{"restaurants":[` + restaurants + `]}}}}`
	}
	tests := []struct {
		name, body, reason string
	}{
		{"empty", ``, "empty body"},
		{"not JSON", `Access Denied`, "invalid JSON"},
		{"trailing data", wrap(``) + `x`, "data after"},
		{"GraphQL errors", `{"data":null,"errors":[{"message":"PersistedQueryNotFound"}]}`, "GraphQL errors (1)"},
		{"no data", `{}`, "restaurants is missing"},
		{"no search", `{"data":{}}`, "restaurants is missing"},
		{"null restaurants", `{"data":{"restaurantSearchV2":{"searchResults":{"restaurants":null}}}}`, "restaurants is missing"},
		{"restaurant without id", wrap(`{"name":"x","availability":{"times":[]}}`), "restaurantId is missing"},
		{"negative id", wrap(`{"restaurantId":-3}`), "not a positive id"},
		{"times missing", wrap(`{"restaurantId":3,"availability":{}}`), "times is missing"},
		{"times not strings", wrap(`{"restaurantId":3,"availability":{"times":[1930]}}`), "invalid JSON"},
		{"time with seconds", wrap(`{"restaurantId":3,"availability":{"times":["19:30:00"]}}`), "want HH:MM"},
		{"time out of range", wrap(`{"restaurantId":3,"availability":{"times":["24:00"]}}`), "want HH:MM"},
		{"too many times", wrap(`{"restaurantId":3,"availability":{"times":[` + strings.Repeat(`"19:30",`, provider.MaxSlotsPerVenue) + `"19:30"]}}`), "more than"},
		{"name too long", wrap(`{"restaurantId":3,"name":"` + strings.Repeat("n", 200) + `"}`), "longer than"},
	}
	a, _ := provider.For(provider.OpenTable)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ents, err := a.Parse([]byte(tt.body), scope, false)
			if !errors.Is(err, provider.ErrMalformed) || ents != nil {
				t.Fatalf("Parse = %v, %v; want nil and ErrMalformed", ents, err)
			}
			if !strings.Contains(err.Error(), tt.reason) || !strings.Contains(err.Error(), "opentable:") {
				t.Errorf("error %q does not name the provider and say %q", err, tt.reason)
			}
		})
	}
}

func TestAdapters_emptyAnswersAreValidObservations(t *testing.T) {
	tests := []struct{ provider, body string }{
		{provider.Resy, `{"results":{"venues":[]}}`},
		{provider.Resy, `{"results":{"venues":[{"venue":{"id":{"resy":42},"name":"x"},"slots":[]}]}}`},
		{provider.Resy, `{"results":{"venues":[{"venue":{"id":{"resy":42}},"slots":null}]}}`},
		{provider.OpenTable, `{"data":{"restaurantSearchV2":{"searchResults":{"restaurants":[]}}}}`},
		{provider.OpenTable, `{"data":{"restaurantSearchV2":{"searchResults":{"restaurants":[{"restaurantId":3,"availability":null}]}}}}`},
		{provider.OpenTable, `{"data":{"restaurantSearchV2":{"searchResults":{"restaurants":[{"restaurantId":3,"availability":{"times":[]}}]}}}}`},
	}
	for _, tt := range tests {
		a, _ := provider.For(tt.provider)
		ents, err := a.Parse([]byte(tt.body), scope, false)
		if err != nil || ents == nil || len(ents) != 0 {
			t.Errorf("%s Parse(%s) = %v, %v; want an empty, non-nil list", tt.provider, tt.body, ents, err)
		}
	}
}
