// Package digest batches notifications into windows per subscriber and
// destination, and sends each window's batch once as one digest.
//
// A Policy names the window: each, every n, hourly, daily or weekly at a
// local time. Time windows are local calendar windows (a day may last 23
// or 25 hours).
//
// The Store keeps open batches in Redis. A digest is delivered under the
// key (subscriber, destination, "digest", window id), so a window flushed
// twice is still sent once.
package digest

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dropstream/dropstream/internal/clip"
)

// Modes of a Policy.
const (
	// ModeEach sends every notification at once (no digest).
	ModeEach = "each"
	// ModeEvery batches every N notifications.
	ModeEvery = "every"
	// ModeHourly batches by local clock hour.
	ModeHourly = "hourly"
	// ModeDaily batches by local day, ending at At.
	ModeDaily = "daily"
	// ModeWeekly batches by week, ending on Weekday at At.
	ModeWeekly = "weekly"
)

// MaxEvery bounds Policy.Every.
const MaxEvery = 1000

// ErrInvalidPolicy is wrapped by Policy.Validate's errors.
var ErrInvalidPolicy = errors.New("digest: invalid policy")

// Policy is how a subscriber's notifications are batched; zero is ModeEach.
type Policy struct {
	// Mode is one of the Mode constants; empty means ModeEach.
	Mode string `json:"mode,omitempty"`
	// Every is the batch size of ModeEvery, 2..MaxEvery.
	Every int `json:"every,omitempty"`
	// At is the local "HH:MM" a daily or weekly window ends. Default "08:00".
	At string `json:"at,omitempty"`
	// Weekday is the day a weekly window ends. Default "monday".
	Weekday string `json:"weekday,omitempty"`
}

// Batches reports whether the policy batches at all.
func (p Policy) Batches() bool { return p.Mode != "" && p.Mode != ModeEach }

// Validate reports why p is not a policy.
func (p Policy) Validate() error {
	var errs []error
	switch p.Mode {
	case "", ModeEach, ModeHourly:
	case ModeEvery:
		if p.Every < 2 || p.Every > MaxEvery {
			errs = append(errs, fmt.Errorf("every %d: want 2..%d", p.Every, MaxEvery))
		}
	case ModeDaily, ModeWeekly:
		if p.At != "" {
			if _, err := ParseClock(p.At); err != nil {
				errs = append(errs, err)
			}
		}
		if _, err := parseWeekday(p.Weekday); p.Mode == ModeWeekly && err != nil {
			errs = append(errs, err)
		}
	default:
		errs = append(errs, fmt.Errorf("mode %q: want each, every, hourly, daily or weekly", clip.Marked(p.Mode, maxQuoted)))
	}
	if p.Mode != ModeEvery && p.Every != 0 {
		errs = append(errs, errors.New("every is only for mode every"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidPolicy, err)
	}
	return nil
}

// Window is one batch window.
type Window struct {
	// ID names the window stably, e.g. "daily:2026-11-22T08:00+01:00" (its
	// end) or "every:42" (the 43rd batch).
	ID string
	// End is when a time window is due; zero for ModeEvery (due when full).
	End time.Time
}

// TimeWindow returns p's window holding t in loc; it fails for ModeEach
// and ModeEvery.
func (p Policy) TimeWindow(t time.Time, loc *time.Location) (Window, error) {
	loc = cmp.Or(loc, time.UTC)
	lt := t.In(loc)
	switch p.Mode {
	case ModeHourly:
		start := time.Date(lt.Year(), lt.Month(), lt.Day(), lt.Hour(), 0, 0, 0, loc)
		end := start.Add(time.Hour)
		return Window{ID: "hourly:" + end.UTC().Format("2006-01-02T15:04Z"), End: end}, nil
	case ModeDaily:
		c, _ := ParseClock(cmp.Or(p.At, "08:00"))
		end := time.Date(lt.Year(), lt.Month(), lt.Day(), c.Hour, c.Minute, 0, 0, loc)
		if !end.After(lt) {
			end = time.Date(lt.Year(), lt.Month(), lt.Day()+1, c.Hour, c.Minute, 0, 0, loc)
		}
		return Window{ID: "daily:" + end.Format("2006-01-02T15:04Z07:00"), End: end}, nil
	case ModeWeekly:
		c, _ := ParseClock(cmp.Or(p.At, "08:00"))
		wd, _ := parseWeekday(p.Weekday)
		days := (int(wd) - int(lt.Weekday()) + 7) % 7
		end := time.Date(lt.Year(), lt.Month(), lt.Day()+days, c.Hour, c.Minute, 0, 0, loc)
		if !end.After(lt) {
			end = time.Date(lt.Year(), lt.Month(), lt.Day()+days+7, c.Hour, c.Minute, 0, 0, loc)
		}
		return Window{ID: "weekly:" + end.Format("2006-01-02T15:04Z07:00"), End: end}, nil
	}
	return Window{}, fmt.Errorf("digest: mode %q has no time windows", p.Mode)
}

// CountWindow returns the window of the seq-th notification (from 1) of a
// ModeEvery policy: batch (seq-1)/Every.
func (p Policy) CountWindow(seq int64) Window {
	return Window{ID: "every:" + strconv.FormatInt((seq-1)/int64(max(p.Every, 1)), 10)}
}

// Clock is a local time of day.
type Clock struct{ Hour, Minute int }

// ParseClock parses "HH:MM" (00:00..23:59).
func ParseClock(s string) (Clock, error) {
	h, m, ok := strings.Cut(s, ":")
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if !ok || len(h) != 2 || len(m) != 2 || err1 != nil || err2 != nil || hh < 0 || hh > 23 || mm < 0 || mm > 59 {
		return Clock{}, fmt.Errorf("time %q: want HH:MM", clip.Marked(s, maxQuoted))
	}
	return Clock{hh, mm}, nil
}

// Minutes returns the clock as minutes after midnight.
func (c Clock) Minutes() int { return c.Hour*60 + c.Minute }

func parseWeekday(s string) (time.Weekday, error) {
	if s == "" {
		return time.Monday, nil
	}
	for d := time.Sunday; d <= time.Saturday; d++ {
		if strings.EqualFold(s, d.String()) {
			return d, nil
		}
	}
	return 0, fmt.Errorf("weekday %q: want monday..sunday", clip.Marked(s, maxQuoted))
}

// maxQuoted bounds outside input quoted in an error (see clip.Marked).
const maxQuoted = 64
