package digest

import (
	"testing"
	"time"
)

func TestPolicy_timeWindows(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	cases := []struct {
		name    string
		p       Policy
		t       string
		wantEnd string
	}{
		{"hourly", Policy{Mode: ModeHourly}, "2026-11-22T10:15:00Z", "2026-11-22T11:00:00Z"},
		{"daily before At", Policy{Mode: ModeDaily, At: "08:00"}, "2026-11-22T06:00:00Z", "2026-11-22T07:00:00Z"},
		{"daily after At", Policy{Mode: ModeDaily, At: "08:00"}, "2026-11-22T07:00:00Z", "2026-11-23T07:00:00Z"},
		// Across the spring DST change: 08:00 Paris is 07:00 UTC before, 06:00 after.
		{"daily across DST", Policy{Mode: ModeDaily, At: "08:00"}, "2026-03-28T09:00:00Z", "2026-03-29T06:00:00Z"},
		// 2026-11-22 is a Sunday; Monday 08:00 Paris is the next day.
		{"weekly", Policy{Mode: ModeWeekly, At: "08:00", Weekday: "monday"}, "2026-11-22T12:00:00Z", "2026-11-23T07:00:00Z"},
		{"weekly on the day after At", Policy{Mode: ModeWeekly, At: "08:00", Weekday: "monday"}, "2026-11-23T08:00:00Z", "2026-11-30T07:00:00Z"},
	}
	for _, c := range cases {
		if err := c.p.Validate(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		w, err := c.p.TimeWindow(at(c.t), paris)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := w.End.UTC().Format(time.RFC3339); got != c.wantEnd {
			t.Errorf("%s: end %s, want %s", c.name, got, c.wantEnd)
		}
		// Every instant of the window has the same id.
		w2, _ := c.p.TimeWindow(w.End.Add(-time.Second), paris)
		if w2.ID != w.ID {
			t.Errorf("%s: ids %q and %q within one window", c.name, w.ID, w2.ID)
		}
		w3, _ := c.p.TimeWindow(w.End, paris)
		if w3.ID == w.ID {
			t.Errorf("%s: the window's end belongs to the next window", c.name)
		}
	}
	every := Policy{Mode: ModeEvery, Every: 3}
	if every.CountWindow(1).ID != every.CountWindow(3).ID || every.CountWindow(3).ID == every.CountWindow(4).ID {
		t.Error("every 3: notifications 1-3 share a window, 4 starts the next")
	}
	for _, bad := range []Policy{{Mode: "monthly"}, {Mode: ModeEvery, Every: 1}, {Mode: ModeDaily, At: "8am"}, {Mode: ModeWeekly, Weekday: "someday"}} {
		if bad.Validate() == nil {
			t.Errorf("%+v validated", bad)
		}
	}
}
