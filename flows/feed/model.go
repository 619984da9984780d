package feed

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dropstream/dropstream/flows/feed/poll"
	textclip "github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/internal/slug"
	"github.com/dropstream/dropstream/internal/tenancy"
)

// ErrInvalid wraps every validation error of outside input.
var ErrInvalid = errors.New("feed: invalid")

// ErrNotFound: no such feed, subscribable, subscription or token.
var ErrNotFound = errors.New("feed: not found")

// ErrConflict: the request contradicts what exists (a feed with other
// settings at the same URL, a feed that still has subscribables).
var ErrConflict = errors.New("feed: conflict")

// Bounds of feed settings.
const (
	MaxURLBytes      = 1024
	MaxDelayMinutes  = 60 * 24 * 365
	MinPollEvery     = time.Second
	MaxPollEvery     = 7 * 24 * time.Hour
	DefaultPollEvery = 15 * time.Minute
)

// Feed is a feed to poll and when its items are ready. Its ID derives from
// its URL, so adding a URL twice names the same feed.
type Feed struct {
	ID  string `json:"id" openapi:"readonly"`
	URL string `json:"url"`
	// MinDelayMinutes: an item is not assigned before it is this old.
	MinDelayMinutes int `json:"min_delay_minutes" openapi:"optional"`
	// AwaitStabilizationMinutes: an item is assigned once its content has
	// not changed for this long (and it is MinDelay old).
	AwaitStabilizationMinutes int `json:"await_stabilization_minutes" openapi:"optional"`
	// MaxDelayMinutes: an item is assigned once it is this old, stable or
	// not.
	MaxDelayMinutes int `json:"max_delay_minutes" openapi:"optional"`
	// PollEvery is the polling period, a Go duration ("15m"). Default 15m.
	PollEvery string `json:"poll_every,omitempty"`
	// IncludeExisting makes items present at the first poll eligible; by
	// default they are Excluded, so adding a feed does not mail its archive.
	IncludeExisting bool      `json:"include_existing,omitempty"`
	Added           time.Time `json:"added" openapi:"readonly"`
}

// Poll returns the polling period.
func (f Feed) Poll() time.Duration {
	d, err := time.ParseDuration(f.PollEvery)
	if err != nil || d == 0 {
		return DefaultPollEvery
	}
	return d
}

// FeedID is the id of the feed at rawURL: 16 hex digits of its hash.
func FeedID(rawURL string) string {
	h := sha256.Sum256([]byte(strings.TrimSpace(rawURL)))
	return hex.EncodeToString(h[:8])
}

// NormalizeURL returns the form of a feed URL that names the feed: trimmed,
// scheme and host lower-cased, default port and fragment dropped.
func NormalizeURL(raw string) string {
	raw = strings.TrimSpace(raw)
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return raw
	}
	u.Scheme, u.Host = strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	if port := u.Port(); (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		u.Host = u.Hostname()
		if strings.Contains(u.Host, ":") { // an IPv6 literal keeps its brackets
			u.Host = "[" + u.Host + "]"
		}
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}

// Validate checks a feed as given by a client, ID and Added ignored.
func (f Feed) Validate() error {
	var errs []error
	u, err := url.Parse(f.URL)
	if err != nil || len(f.URL) > MaxURLBytes || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || !printable(f.URL) {
		errs = append(errs, fmt.Errorf("url: want an http(s) URL of at most %d bytes", MaxURLBytes))
	}
	for name, v := range map[string]int{"min_delay_minutes": f.MinDelayMinutes, "await_stabilization_minutes": f.AwaitStabilizationMinutes, "max_delay_minutes": f.MaxDelayMinutes} {
		if v < 0 || v > MaxDelayMinutes {
			errs = append(errs, fmt.Errorf("%s: want 0..%d", name, MaxDelayMinutes))
		}
	}
	if f.MaxDelayMinutes < f.MinDelayMinutes {
		errs = append(errs, errors.New("max_delay_minutes: must not be below min_delay_minutes"))
	}
	if f.PollEvery != "" {
		d, err := time.ParseDuration(f.PollEvery)
		if err != nil || d < MinPollEvery || d > MaxPollEvery {
			errs = append(errs, fmt.Errorf("poll_every: want a duration of %s..%s", MinPollEvery, MaxPollEvery))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w feed: %w", ErrInvalid, err)
	}
	return nil
}

// sameSettings reports whether two feeds at one URL agree.
func (f Feed) sameSettings(g Feed) bool {
	return f.URL == g.URL && f.MinDelayMinutes == g.MinDelayMinutes && f.AwaitStabilizationMinutes == g.AwaitStabilizationMinutes &&
		f.MaxDelayMinutes == g.MaxDelayMinutes && f.Poll() == g.Poll() && f.IncludeExisting == g.IncludeExisting
}

func minutes(n int) time.Duration { return time.Duration(n) * time.Minute }

// validName reports 1..64 characters of [a-z0-9_-].
func validName(s string) bool { return slug.Valid(s, 64) }

// validID reports 1..64 lowercase hex digits.
func validID(s string) bool {
	return len(s) > 0 && len(s) <= 64 && strings.Trim(s, "0123456789abcdef") == ""
}

// printable reports valid UTF-8 without ASCII control characters.
func printable(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

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
		if _, ok := poll.Weekdays[strings.ToLower(m.Weekday)]; m.Kind == Weekly && !ok {
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
	wd := poll.Weekdays[strings.ToLower(m.Weekday)]
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
