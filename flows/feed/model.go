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

	"github.com/dropstream/dropstream/internal/slug"
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
