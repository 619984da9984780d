package feed

import (
	"errors"
	"fmt"
	"strings"
	"time"

	textclip "github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/internal/tenancy"
)

// Manager kinds: how a subscribable gathers items into collections.
const (
	// EachItem: every item is a collection of one, completed at once.
	EachItem = "each"
	// Daily: the items assigned from Hour one day until Hour the next, in
	// TimeZone, form one collection, completed at its end.
	Daily = "daily"
	// Weekly: the items assigned from Weekday at Hour until the same time
	// a week later, in TimeZone.
	Weekly = "weekly"
	// EveryN: every N items form a collection, completed at the Nth.
	EveryN = "every_n"
)

// MaxEveryN bounds EveryN's N.
const MaxEveryN = 1000

// Manager names the collection an item assigned at a given time goes to
// and says when it is complete.
type Manager struct {
	Kind string `json:"kind"`
	// Hour (0..23) starts a Daily or Weekly window, in TimeZone.
	Hour int `json:"hour,omitempty"`
	// Weekday starts a Weekly window: "monday" .. "sunday".
	Weekday string `json:"weekday,omitempty"`
	// TimeZone is an IANA name; default "UTC".
	TimeZone string `json:"time_zone,omitempty"`
	// N is EveryN's collection size, 1..MaxEveryN.
	N int `json:"n,omitempty"`
}

var weekdays = map[string]time.Weekday{"sunday": time.Sunday, "monday": time.Monday, "tuesday": time.Tuesday,
	"wednesday": time.Wednesday, "thursday": time.Thursday, "friday": time.Friday, "saturday": time.Saturday}

// Validate checks the manager's fields for its kind.
func (m Manager) Validate() error {
	var errs []error
	switch m.Kind {
	case EachItem:
	case EveryN:
		if m.N < 1 || m.N > MaxEveryN {
			errs = append(errs, fmt.Errorf("n: want 1..%d", MaxEveryN))
		}
	case Daily, Weekly:
		if m.Hour < 0 || m.Hour > 23 {
			errs = append(errs, errors.New("hour: want 0..23"))
		}
		if _, err := m.location(); err != nil {
			errs = append(errs, fmt.Errorf("time_zone: unknown %q", clip(m.TimeZone, 64)))
		}
		if _, ok := weekdays[strings.ToLower(m.Weekday)]; m.Kind == Weekly && !ok {
			errs = append(errs, errors.New("weekday: want monday..sunday"))
		}
	default:
		errs = append(errs, fmt.Errorf("kind: want %s, %s, %s or %s", EachItem, Daily, Weekly, EveryN))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w manager: %w", ErrInvalid, err)
	}
	return nil
}

func (m Manager) location() (*time.Location, error) {
	if m.TimeZone == "" {
		return time.UTC, nil
	}
	if len(m.TimeZone) > 64 {
		return nil, errors.New("time zone too long")
	}
	return time.LoadLocation(m.TimeZone)
}

// Window returns, for Daily and Weekly, the collection an item assigned at
// now joins ("2026-11-22", "w2026-11-16") and when it completes.
func (m Manager) Window(now time.Time) (within string, due time.Time, ok bool) {
	if m.Kind != Daily && m.Kind != Weekly {
		return "", time.Time{}, false
	}
	loc, err := m.location()
	if err != nil {
		loc = time.UTC
	}
	t := now.In(loc)
	start := time.Date(t.Year(), t.Month(), t.Day(), m.Hour, 0, 0, 0, loc)
	if start.After(t) {
		start = start.AddDate(0, 0, -1)
	}
	if m.Kind == Daily {
		return start.Format("2006-01-02"), start.AddDate(0, 0, 1), true
	}
	wd := weekdays[strings.ToLower(m.Weekday)]
	back := (int(start.Weekday()) - int(wd) + 7) % 7
	start = start.AddDate(0, 0, -back)
	return "w" + start.Format("2006-01-02"), start.AddDate(0, 0, 7), true
}

// Subscribable is a subscription definition over a feed: a name, unique
// per feed and tenant, and a manager.
type Subscribable struct {
	FeedID string `json:"feed_id" openapi:"readonly"`
	Name   string `json:"name"`
	// Tenant owns it ("": tenancy.Open, also for one stored before
	// tenants were recorded).
	Tenant  string    `json:"tenant,omitempty" openapi:"readonly"`
	Manager Manager   `json:"manager"`
	Added   time.Time `json:"added" openapi:"readonly"`
}

// Key is the name the subscribable is stored under (SubscribableKey).
func (s Subscribable) Key() string { return SubscribableKey(s.Tenant, s.Name) }

// SubscribableKey is the key of a tenant's subscribable within its feed:
// the name for tenancy.Open, else the tenant's tag, '.' and the name.
func SubscribableKey(tenant, name string) string {
	if tag := tenancy.Tag(tenant); tag != "" {
		return tag + "." + name
	}
	return name
}

// displayName is the name of the subscribable stored under key, as its
// tenant named it (what messages show).
func displayName(key string) string {
	if tag, name, ok := strings.Cut(key, "."); ok && tenancy.IsTag(tag) {
		return name
	}
	return key
}

// validKey reports whether key is a SubscribableKey.
func validKey(key string) bool {
	if tag, name, ok := strings.Cut(key, "."); ok {
		return tenancy.IsTag(tag) && validName(name)
	}
	return validName(key)
}

// ownerOf returns the stored form of tenant: "" for tenancy.Open.
func ownerOf(tenant string) string {
	if t := tenancy.Of(tenant); t != tenancy.Open {
		return t
	}
	return ""
}

// Validate checks a subscribable as given by a client.
func (s Subscribable) Validate() error {
	if !validName(s.Name) {
		return fmt.Errorf("%w subscribable: name: want 1-64 characters of [a-z0-9_-]", ErrInvalid)
	}
	if !validID(s.FeedID) {
		return fmt.Errorf("%w subscribable: feed_id", ErrInvalid)
	}
	return s.Manager.Validate()
}

// clip is clip.String (package textclip here: this package's flow.go and
// history.go call it by this name).
func clip(s string, n int) string { return textclip.String(s, n) }
