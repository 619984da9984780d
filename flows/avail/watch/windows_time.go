package watch

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/internal/clip"
)

// Limits of a watcher's preferences.
const (
	MaxWindows      = 14
	MaxTimeZoneLen  = 64
	MaxRearmMinutes = 7 * 24 * 60
)

// weekdays are the names of Window.Days, Sunday first as time.Weekday.
var weekdays = []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}

// Window is a time-of-day range on some weekdays (all when Days is empty),
// read in the watcher's TimeZone: From inclusive, To exclusive.
type Window struct {
	// Days are weekday names ("mon".."sun"), at most 7 distinct; empty
	// means every day.
	Days []string `json:"days,omitempty"`
	// From and To are "HH:MM" (To may be "24:00"), From before To.
	From string `json:"from"`
	To   string `json:"to"`
}

// minuteOf parses "HH:MM" (00:00..24:00) into minutes of the day.
func minuteOf(s string) (int, bool) {
	if len(s) != 5 || s[2] != ':' {
		return 0, false
	}
	t, err := time.Parse("15:04", s)
	if err != nil {
		if s == "24:00" {
			return 24 * 60, true
		}
		return 0, false
	}
	return t.Hour()*60 + t.Minute(), true
}

// validWindows checks a watcher's windows and time zone.
func validWindows(ws []Window, tz string) error {
	var errs []error
	if tz != "" {
		if len(tz) > MaxTimeZoneLen {
			errs = append(errs, fmt.Errorf("time_zone longer than %d bytes", MaxTimeZoneLen))
		} else if _, err := location(tz); err != nil {
			errs = append(errs, fmt.Errorf("time_zone %q: want an IANA zone name such as Europe/Paris", clip.Marked(tz, maxQuoted)))
		}
	}
	if len(ws) > MaxWindows {
		return errors.Join(append(errs, fmt.Errorf("windows: at most %d, got %d", MaxWindows, len(ws)))...)
	}
	for i, w := range ws {
		from, okF := minuteOf(w.From)
		to, okT := minuteOf(w.To)
		switch {
		case !okF || !okT || from == 24*60:
			errs = append(errs, fmt.Errorf("windows[%d]: from and to want HH:MM (to may be 24:00)", i))
		case from >= to:
			errs = append(errs, fmt.Errorf("windows[%d]: from %s is not before to %s", i, w.From, w.To))
		}
		if len(w.Days) > 7 {
			errs = append(errs, fmt.Errorf("windows[%d]: at most 7 days", i))
			continue
		}
		for j, d := range w.Days {
			if !slices.Contains(weekdays, d) || slices.Contains(w.Days[:j], d) {
				errs = append(errs, fmt.Errorf("windows[%d]: day %q: want distinct names of mon, tue, wed, thu, fri, sat, sun",
					i, clip.Marked(d, maxQuoted)))
				break
			}
		}
	}
	return errors.Join(errs...)
}

// zones caches loaded time zones by name (names are bounded and
// validated, so the cache holds few entries).
var zones sync.Map

// location returns the zone of an IANA name ("" is UTC).
func location(name string) (*time.Location, error) {
	if name == "" {
		return time.UTC, nil
	}
	if l, ok := zones.Load(name); ok {
		return l.(*time.Location), nil
	}
	l, err := time.LoadLocation(name)
	if err != nil {
		return nil, err
	}
	zones.Store(name, l)
	return l, nil
}

// inWindows reports whether the entity's slot starts in one of the
// watcher's windows; a whole day is in a window holding its weekday.
func (w Watcher) inWindows(e avail.Entity) bool {
	zone, err := location(w.TimeZone)
	if err != nil || e.Date == "" {
		return false
	}
	hasTime := e.Time != "" && e.Time != "*"
	var start time.Time
	if hasTime {
		venue := zone
		if name := e.Attrs["time_zone"]; name != "" && len(name) <= MaxTimeZoneLen {
			if l, err := location(name); err == nil {
				venue = l
			}
		}
		t, err := time.ParseInLocation("2006-01-02 15:04", e.Date+" "+e.Time, venue)
		if err != nil {
			return false
		}
		start = t.In(zone)
	} else {
		t, err := time.Parse(dateLayout, e.Date)
		if err != nil {
			return false
		}
		start = t
	}
	day, minute := weekdays[start.Weekday()], start.Hour()*60+start.Minute()
	for _, win := range w.Windows {
		if len(win.Days) > 0 && !slices.Contains(win.Days, day) {
			continue
		}
		if !hasTime {
			return true
		}
		from, _ := minuteOf(win.From)
		to, _ := minuteOf(win.To)
		if minute >= from && minute < to {
			return true
		}
	}
	return false
}
