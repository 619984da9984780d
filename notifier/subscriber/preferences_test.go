package subscriber

import (
	"testing"
	"time"
)

func TestQuietHours_acrossTimeZones(t *testing.T) {
	q := &QuietHours{Start: "22:00", End: "07:00"}
	// 2026-03-28 22:30 UTC: 07:30 on the 29th in Tokyo (after the quiet
	// hours, on the next local day), 18:30 in New York, 23:30 in Paris.
	at := time.Date(2026, 3, 28, 22, 30, 0, 0, time.UTC)
	cases := []struct {
		zone    string
		quiet   bool
		wantEnd string // local end, when quiet
	}{
		{"Asia/Tokyo", false, ""},
		{"America/New_York", false, ""},
		// Paris switches to summer time in that night: 07:00 local on the
		// 29th is 05:00 UTC, not 06:00.
		{"Europe/Paris", true, "2026-03-29T05:00:00Z"},
		{"UTC", true, "2026-03-29T07:00:00Z"},
		// 11:30 on the 29th in Auckland: outside.
		{"Pacific/Auckland", false, ""},
	}
	for _, c := range cases {
		loc, err := LoadLocation(c.zone)
		if err != nil {
			t.Fatal(err)
		}
		quiet, end := q.Quiet(at, loc)
		if quiet != c.quiet || (quiet && end.UTC().Format(time.RFC3339) != c.wantEnd) {
			t.Errorf("%s: quiet %v until %s, want %v until %s", c.zone, quiet, end.UTC().Format(time.RFC3339), c.quiet, c.wantEnd)
		}
	}
	// A range within one day.
	day := &QuietHours{Start: "09:00", End: "17:00"}
	tokyo, _ := LoadLocation("Asia/Tokyo")
	if quiet, end := day.Quiet(time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC), tokyo); !quiet || end.UTC().Hour() != 8 {
		t.Errorf("10:00 Tokyo in 09:00-17:00: quiet %v until %s", quiet, end)
	}
}

func TestPreferences_wants(t *testing.T) {
	p := Preferences{Include: []string{"avail:resy|*", "comic:42"}, Exclude: []string{"avail:resy|noma*"}}
	cases := map[string]bool{
		"avail:resy|chez|2026": true,
		"avail:resy|noma|2026": false,
		"comic:42":             true,
		"comic:43":             false,
	}
	for subject, want := range cases {
		if got := p.Wants(subject); got != want {
			t.Errorf("Wants(%q) = %v, want %v", subject, got, want)
		}
	}
	if !(Preferences{}).Wants("anything") {
		t.Error("empty preferences want everything")
	}
	off := Preferences{Channels: map[string]bool{"email": false, "webhook": true}}
	if off.ChannelOn("email") || !off.ChannelOn("webhook") || !off.ChannelOn("slack") {
		t.Error("channel switches")
	}
}
