package collector_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/collector"
)

func validSource() collector.Source {
	return collector.Source{ID: "resy-nyc_1", Provider: "resy", BaseURL: "https://api.example.com/v1",
		Scopes: []avail.Scope{{Venue: "1001", Date: "2026-11-21", PartySize: 2}}}
}

func TestSource_validateAcceptsValidSourcesAndDefaults(t *testing.T) {
	src := validSource()
	if err := src.Validate(); err != nil {
		t.Fatal(err)
	}
	d := src.WithDefaults()
	if d.Interval != 60*time.Second || d.Stabilization != 2 || d.RateLimit != 5 {
		t.Errorf("defaults %v/%d/%v, want 60s/2/5", d.Interval, d.Stabilization, d.RateLimit)
	}
	many := validSource()
	many.Scopes = nil
	for i := range avail.MaxScopes {
		many.Scopes = append(many.Scopes, avail.Scope{Date: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, i).Format(time.DateOnly), PartySize: 2})
	}
	if err := many.Validate(); err != nil {
		t.Errorf("%d scopes: %v", avail.MaxScopes, err)
	}
}

func TestSource_validateRejectsEachBadField(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(*collector.Source)
		reason string
	}{
		{"empty id", func(s *collector.Source) { s.ID = "" }, "id"},
		{"upper-case id", func(s *collector.Source) { s.ID = "Resy" }, "id"},
		{"long id", func(s *collector.Source) { s.ID = strings.Repeat("a", 65) }, "id"},
		{"id with a bar", func(s *collector.Source) { s.ID = "a|b" }, "id"},
		{"unknown provider", func(s *collector.Source) { s.Provider = "yelp" }, "unknown provider"},
		{"ftp URL", func(s *collector.Source) { s.BaseURL = "ftp://example.com" }, "http or https"},
		{"relative URL", func(s *collector.Source) { s.BaseURL = "/find" }, "http or https"},
		{"URL without host", func(s *collector.Source) { s.BaseURL = "http://" }, "no host"},
		{"URL with credentials", func(s *collector.Source) { s.BaseURL = "https://u:p@example.com" }, "credentials"},
		{"URL with a query", func(s *collector.Source) { s.BaseURL = "https://example.com/?k=1" }, "query"},
		{"long URL", func(s *collector.Source) { s.BaseURL = "https://example.com/" + strings.Repeat("a", 3000) }, "longer"},
		{"no scopes", func(s *collector.Source) { s.Scopes = nil }, "0 scopes"},
		{"too many scopes", func(s *collector.Source) { s.Scopes = make([]avail.Scope, avail.MaxScopes+1) }, "scopes"},
		{"invalid scope", func(s *collector.Source) { s.Scopes[0].Date = "tomorrow" }, "scope 0"},
		{"venue the provider cannot take", func(s *collector.Source) { s.Scopes[0].Venue = "carbone" }, "numeric"},
		{"duplicate scope", func(s *collector.Source) { s.Scopes = append(s.Scopes, s.Scopes[0]) }, "duplicates"},
		{"interval below 1s", func(s *collector.Source) { s.Interval = 500 * time.Millisecond }, "interval"},
		{"interval above a day", func(s *collector.Source) { s.Interval = 25 * time.Hour }, "interval"},
		{"negative interval", func(s *collector.Source) { s.Interval = -time.Second }, "interval"},
		{"stabilization 11", func(s *collector.Source) { s.Stabilization = 11 }, "stabilization"},
		{"negative stabilization", func(s *collector.Source) { s.Stabilization = -1 }, "stabilization"},
		{"negative rate", func(s *collector.Source) { s.RateLimit = -1 }, "rate limit"},
		{"huge rate", func(s *collector.Source) { s.RateLimit = 1e6 }, "rate limit"},
		{"token with a newline", func(s *collector.Source) { s.AuthToken = "a\r\nX-Evil: 1" }, "auth token"},
		{"long token", func(s *collector.Source) { s.AuthToken = strings.Repeat("t", 5000) }, "auth token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := validSource()
			src.Scopes = append([]avail.Scope(nil), src.Scopes...)
			tt.edit(&src)
			err := src.Validate()
			if !errors.Is(err, collector.ErrInvalidSource) || !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("Validate = %v, want ErrInvalidSource about %q", err, tt.reason)
			}
		})
	}
}

func TestSource_jsonRoundTripWithDurationStrings(t *testing.T) {
	src := validSource()
	src.Interval, src.AuthToken, src.RestaurantLevel = 90*time.Second, "secret", true
	b, err := json.Marshal(src)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"interval":"1m30s"`) {
		t.Errorf("JSON %s lacks the interval as a duration string", b)
	}
	var back collector.Source
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Fingerprint() != src.Fingerprint() {
		t.Errorf("round trip changed the source: %+v", back)
	}
	if r := src.Redacted(); r.AuthToken != "redacted" || r.Fingerprint() == src.Fingerprint() {
		t.Errorf("Redacted kept the token: %+v", r)
	}
}

func TestSource_unmarshalIsStrict(t *testing.T) {
	tests := []struct{ name, in string }{
		{"unknown field", `{"id":"a","provider":"resy","base_url":"http://x","scopes":[],"surprise":1}`},
		{"unknown scope field", `{"id":"a","scopes":[{"date":"2026-11-21","party_size":2,"time":"19:00"}]}`},
		{"numeric interval", `{"id":"a","interval":60}`},
		{"bad interval", `{"id":"a","interval":"a minute"}`},
		{"not an object", `["a"]`},
	}
	for _, tt := range tests {
		var src collector.Source
		if err := json.Unmarshal([]byte(tt.in), &src); !errors.Is(err, collector.ErrInvalidSource) {
			t.Errorf("%s: Unmarshal = %v, want ErrInvalidSource", tt.name, err)
		}
	}
}

func TestSource_fingerprintChangesWithAnyField(t *testing.T) {
	base := validSource()
	same := validSource()
	same.Interval = collector.DefaultInterval // a default spelled out is the same configuration
	if base.Fingerprint() != same.Fingerprint() {
		t.Error("an explicit default changed the fingerprint")
	}
	edits := []func(*collector.Source){
		func(s *collector.Source) { s.AuthToken = "t" },
		func(s *collector.Source) { s.Interval = time.Minute + time.Second },
		func(s *collector.Source) { s.NotifyFirstSight = true },
		func(s *collector.Source) { s.Scopes = []avail.Scope{{Date: "2026-11-21", PartySize: 3}} },
	}
	for i, edit := range edits {
		s := validSource()
		edit(&s)
		if s.Fingerprint() == base.Fingerprint() {
			t.Errorf("edit %d kept the fingerprint", i)
		}
	}
}
