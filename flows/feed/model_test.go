package feed

import (
	"errors"
	"testing"
	"time"

	"github.com/dropstream/dropstream/internal/testenv"
)

func TestManager_Window(t *testing.T) {
	ny := Manager{Kind: Daily, Hour: 8, TimeZone: "America/New_York"}
	paris := Manager{Kind: Weekly, Weekday: "friday", Hour: 17, TimeZone: "Europe/Paris"}
	utc := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	tests := []struct {
		name   string
		m      Manager
		now    string
		within string
		due    string
	}{
		{"daily before the hour", ny, "2026-03-02T09:00:00Z", "2026-03-01", "2026-03-02T13:00:00Z"},
		{"daily at the hour", ny, "2026-03-02T13:00:00Z", "2026-03-02", "2026-03-03T13:00:00Z"},
		// New York moves to EDT on 2026-03-08: the window ending that day is 23 hours.
		{"daily across DST", ny, "2026-03-07T20:00:00Z", "2026-03-07", "2026-03-08T12:00:00Z"},
		{"weekly on monday", paris, "2026-03-02T09:00:00Z", "w2026-02-27", "2026-03-06T16:00:00Z"},
		{"weekly at the hour", paris, "2026-03-06T16:00:00Z", "w2026-03-06", "2026-03-13T16:00:00Z"},
		{"daily utc default", Manager{Kind: Daily}, "2026-03-02T00:00:00Z", "2026-03-02", "2026-03-03T00:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			within, due, ok := tt.m.Window(utc(tt.now))
			if !ok || within != tt.within || !due.Equal(utc(tt.due)) {
				t.Fatalf("Window(%s) = %q, %s, %v; want %q, %s", tt.now, within, due.UTC(), ok, tt.within, tt.due)
			}
		})
	}
	if _, _, ok := (Manager{Kind: EveryN, N: 3}).Window(time.Now()); ok {
		t.Error("EveryN has no time window")
	}
}

func TestManager_Validate(t *testing.T) {
	good := []Manager{{Kind: EachItem}, {Kind: EveryN, N: 1}, {Kind: Daily, Hour: 23, TimeZone: "Asia/Tokyo"}, {Kind: Weekly, Weekday: "Sunday"}}
	for _, m := range good {
		if err := m.Validate(); err != nil {
			t.Errorf("%+v: %v", m, err)
		}
	}
	bad := []Manager{{}, {Kind: "hourly"}, {Kind: EveryN}, {Kind: EveryN, N: MaxEveryN + 1}, {Kind: Daily, Hour: 24},
		{Kind: Daily, TimeZone: "Mars/Olympus"}, {Kind: Weekly, Weekday: "someday"}}
	for _, m := range bad {
		if err := m.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", m, err)
		}
	}
}

func TestDestination_Unique(t *testing.T) {
	tests := []struct {
		d    Destination
		want string
	}{
		{Destination{Kind: DestEmail, Address: "Buffy <B@Slayers.org>"}, "email:b@slayers.org"},
		{Destination{Kind: DestEmail, Address: "b@slayers.org"}, "email:b@slayers.org"},
		{Destination{Kind: DestWebhook, URL: "https://Hooks.Example.org/x"}, "webhook:https://hooks.example.org/x"},
		{Destination{Kind: DestLog, Name: "ops"}, "log:ops"},
	}
	for _, tt := range tests {
		if got, err := tt.d.Unique(); err != nil || got != tt.want {
			t.Errorf("%+v: %q %v, want %q", tt.d, got, err, tt.want)
		}
	}
	for _, d := range []Destination{{Kind: DestEmail, Address: "not an address"}, {Kind: DestWebhook, URL: "javascript:alert(1)"},
		{Kind: DestLog, Name: "Has Spaces"}, {Kind: "sms"}} {
		if _, err := d.Unique(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", d, err)
		}
	}
}

func TestFeed_Assignable(t *testing.T) {
	f := Feed{MinDelayMinutes: 5, AwaitStabilizationMinutes: 10, MaxDelayMinutes: 60}
	first := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	tests := []struct {
		stable, now time.Duration
		want        bool
	}{
		{0, 9 * time.Minute, false},
		{0, 10 * time.Minute, true},
		{30 * time.Minute, 39 * time.Minute, false},
		{30 * time.Minute, 40 * time.Minute, true},
		{59 * time.Minute, 60 * time.Minute, true}, // max delay
	}
	for _, tt := range tests {
		if got := assignable(f, first, first.Add(tt.stable), first.Add(tt.now)); got != tt.want {
			t.Errorf("stable +%s, now +%s: %v, want %v", tt.stable, tt.now, got, tt.want)
		}
	}
}

func TestNormalizeURL_equivalentFormsNameOneFeed(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://example.org/feed.xml", "https://example.org/feed.xml"},
		{"  HTTPS://Example.ORG/feed.xml ", "https://example.org/feed.xml"},
		{"https://example.org:443/feed.xml", "https://example.org/feed.xml"},
		{"http://example.org:80/feed.xml#top", "http://example.org/feed.xml"},
		{"http://example.org:8080/Feed.XML?Page=1", "http://example.org:8080/Feed.XML?Page=1"},
		{"https://[2001:DB8::1]:443/f", "https://[2001:db8::1]/f"},
		{"not a url", "not a url"},
	}
	for _, tt := range tests {
		if got := NormalizeURL(tt.in); got != tt.want {
			t.Errorf("NormalizeURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestStore_putFeedOfAnEquivalentURLReturnsTheSameFeed(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			f := bareFlow(t, b)
			first, created, err := f.store.PutFeed(t.Context(), Feed{URL: "https://example.org/feed.xml"})
			if err != nil || !created {
				t.Fatalf("first put: created %v, %v", created, err)
			}
			again, created, err := f.store.PutFeed(t.Context(), Feed{URL: "HTTPS://EXAMPLE.org:443/feed.xml#latest"})
			if err != nil || created || again.ID != first.ID || again.URL != "https://example.org/feed.xml" {
				t.Fatalf("second put = %+v, created %v, %v; want the first feed, not created", again, created, err)
			}
			all, err := f.store.Feeds(t.Context())
			if err != nil || len(all) != 1 {
				t.Fatalf("feeds %+v, %v; want one", all, err)
			}
		})
	}
}
