package subscriber

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // time zones without the system database

	"github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/notifier/digest"
)

// Limits of Preferences.
const (
	MaxPatterns   = 100
	MaxPatternLen = 256
)

// Preferences are a subscriber's choices about what reaches them and when.
type Preferences struct {
	// Include, when set, passes only subjects matching a pattern: exact, or
	// a prefix ending in "*" ("avail:resy|*").
	Include []string `json:"include,omitempty"`
	// Exclude drops matching subjects; it wins over Include.
	Exclude []string `json:"exclude,omitempty"`
	// QuietHours holds non-critical notifications, sent as a digest after.
	QuietHours *QuietHours `json:"quiet_hours,omitempty"`
	// Channels switches channels off with false; unlisted ones are on.
	Channels map[string]bool `json:"channels,omitempty"`
	// Digest batches non-critical notifications; zero sends each at once.
	Digest digest.Policy `json:"digest,omitzero"`
}

// QuietHours is a local range [Start, End) that may wrap midnight.
type QuietHours struct {
	Start string `json:"start"`
	End   string `json:"end"`
}

// Validate reports every invalid field.
func (p Preferences) Validate() error {
	var errs []error
	for _, list := range []struct {
		name string
		v    []string
	}{{"include", p.Include}, {"exclude", p.Exclude}} {
		if len(list.v) > MaxPatterns {
			errs = append(errs, fmt.Errorf("%s: at most %d patterns", list.name, MaxPatterns))
		}
		for _, pat := range list.v {
			if pat == "" || pat == "*" && list.name == "exclude" || len(pat) > MaxPatternLen || strings.ContainsAny(pat, "\x00\r\n") ||
				strings.Contains(strings.TrimSuffix(pat, "*"), "*") {
				errs = append(errs, fmt.Errorf("%s pattern %q: want 1-%d bytes, an exact subject or a prefix ending in *", list.name, clip.Marked(pat, maxQuoted), MaxPatternLen))
			}
		}
	}
	if q := p.QuietHours; q != nil {
		s, err1 := digest.ParseClock(q.Start)
		e, err2 := digest.ParseClock(q.End)
		errs = append(errs, err1, err2)
		if err1 == nil && err2 == nil && s == e {
			errs = append(errs, errors.New("quiet hours: start equals end"))
		}
	}
	if len(p.Channels) > 8 {
		errs = append(errs, errors.New("channels: at most 8 switches"))
	}
	for ch := range p.Channels {
		if ch != "email" && ch != "webhook" && ch != "slack" && ch != "log" {
			errs = append(errs, fmt.Errorf("channel %q: want email, webhook, slack or log", clip.Marked(ch, maxQuoted)))
		}
	}
	errs = append(errs, p.Digest.Validate())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: preferences: %w", ErrInvalid, err)
	}
	return nil
}

// Wants reports whether subject passes the include and exclude lists.
func (p Preferences) Wants(subject string) bool {
	for _, pat := range p.Exclude {
		if matchPattern(pat, subject) {
			return false
		}
	}
	if len(p.Include) == 0 {
		return true
	}
	for _, pat := range p.Include {
		if matchPattern(pat, subject) {
			return true
		}
	}
	return false
}

// ChannelOn reports whether the channel is switched on.
func (p Preferences) ChannelOn(channel string) bool {
	on, set := p.Channels[channel]
	return !set || on
}

func matchPattern(pat, subject string) bool {
	if prefix, ok := strings.CutSuffix(pat, "*"); ok {
		return strings.HasPrefix(subject, prefix)
	}
	return pat == subject
}

// Quiet reports whether t is quiet in loc, and if so when it ends.
func (q *QuietHours) Quiet(t time.Time, loc *time.Location) (bool, time.Time) {
	if q == nil {
		return false, time.Time{}
	}
	s, err1 := digest.ParseClock(q.Start)
	e, err2 := digest.ParseClock(q.End)
	if err1 != nil || err2 != nil || s == e {
		return false, time.Time{}
	}
	loc = cmp.Or(loc, time.UTC)
	lt := t.In(loc)
	now := lt.Hour()*60 + lt.Minute()
	var in bool
	if s.Minutes() < e.Minutes() {
		in = now >= s.Minutes() && now < e.Minutes()
	} else {
		in = now >= s.Minutes() || now < e.Minutes()
	}
	if !in {
		return false, time.Time{}
	}
	end := time.Date(lt.Year(), lt.Month(), lt.Day(), e.Hour, e.Minute, 0, 0, loc)
	if !end.After(lt) {
		end = time.Date(lt.Year(), lt.Month(), lt.Day()+1, e.Hour, e.Minute, 0, 0, loc)
	}
	return true, end
}

// LoadLocation returns the IANA time zone tz; "" is UTC.
func LoadLocation(tz string) (*time.Location, error) {
	if tz == "" {
		return time.UTC, nil
	}
	if len(tz) > 64 {
		return nil, fmt.Errorf("%w: time zone longer than 64 bytes", ErrInvalid)
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("%w: time zone %q: %w", ErrInvalid, clip.Marked(tz, maxQuoted), err)
	}
	return loc, nil
}
