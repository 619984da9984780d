package watch

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/internal/bounds"
	"github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/subscriber"
)

// Limits on watcher fields (outside input).
const (
	MaxNameLen       = 128
	MaxPartySizes    = 20
	MaxPartySize     = 50
	MaxWebhookURLLen = 2048
	MinSecretLen     = subscriber.MinSecretLen
	MaxSecretLen     = subscriber.MaxSecretLen
	// maxSlotLen bounds an entity key: five parts of avail.MaxFieldLen.
	maxSlotLen = 5*avail.MaxFieldLen + 4
)

// dateLayout is the layout of DateFrom and DateTo.
const dateLayout = "2006-01-02"

// ErrInvalidWatcher is wrapped by every watcher, id or cursor validation error.
var ErrInvalidWatcher = errors.New("notifier: invalid watcher")

// Watcher is a subscription to openings: it matches an entity when every
// filter it sets holds, and is told once per open window. It sets Slot,
// Venue or Provider; Venue requires Provider.
type Watcher struct {
	// ID is set by Store.Create: "w_" + 28 hex digits that sort by age.
	ID string `json:"id" openapi:"readonly"`
	// Name is a label for people: 1..MaxNameLen bytes of printable UTF-8.
	Name string `json:"name"`
	// Provider, when set, must equal the entity's provider.
	Provider string `json:"provider,omitempty"`
	// Venue, when set, must equal the entity's venue.
	Venue string `json:"venue,omitempty"`
	// DateFrom and DateTo (YYYY-MM-DD, inclusive) bound the entity's date.
	DateFrom string `json:"date_from,omitempty"`
	DateTo   string `json:"date_to,omitempty"`
	// PartySizes (≤ MaxPartySizes distinct, 1..MaxPartySize) must contain
	// the entity's party size.
	PartySizes []int `json:"party_sizes,omitempty"`
	// Slot is an exact entity key (avail.SlotKey or avail.RestaurantKey).
	Slot string `json:"slot,omitempty"`
	// Channel is notifier.ChannelWebhook or notifier.ChannelLog.
	Channel string `json:"channel"`
	// WebhookURL is the http(s) URL posted to; only and always for webhooks.
	WebhookURL string `json:"webhook_url,omitempty"`
	// Secret is the webhook HMAC key; Create generates and returns one when
	// empty, Get and List never return it.
	Secret string `json:"secret,omitempty" openapi:"readonly"`
	// CreatedAt is set by Store.Create.
	CreatedAt time.Time `json:"created_at" openapi:"readonly"`
	// Owner is the tenant that alone (with admin keys) sees and changes it,
	// counted against MaxPerOwner. Set by the API; none means tenancy.Open.
	Owner string `json:"owner,omitempty" openapi:"readonly"`

	// Paused watchers are told nothing until resumed, nor later.
	Paused bool `json:"paused,omitempty"`
	// Windows (≤ MaxWindows) narrow the match to slots starting inside one,
	// in TimeZone; a slot without a time matches on a window's Days.
	Windows []Window `json:"windows,omitempty"`
	// TimeZone is the Windows' IANA zone, into which a slot's "time_zone"
	// attribute converts. Default "UTC".
	TimeZone string `json:"time_zone,omitempty"`
	// NotifyGone asks for "availability.gone" on the stable close of a told slot.
	NotifyGone bool `json:"notify_gone,omitempty"`
	// RearmAfterMinutes N (1..MaxRearmMinutes) tells a reopening only after
	// N closed minutes; 0 (default) tells every window.
	RearmAfterMinutes int `json:"rearm_after_minutes,omitempty"`
	// Provisional asks for "availability.provisional" on a raw open and
	// "availability.retracted" if it closes unconfirmed.
	Provisional bool `json:"provisional,omitempty"`
	// MuteSourceHealth turns off the availability.source_down/up notices.
	MuteSourceHealth bool `json:"mute_source_health,omitempty"`
}

// Validate reports every invalid field of a watcher to create (ignoring ID,
// CreatedAt and an empty Secret), wrapping ErrInvalidWatcher.
func (w Watcher) Validate() error {
	var errs []error
	if w.Name == "" || len(w.Name) > MaxNameLen || !printable(w.Name) {
		errs = append(errs, fmt.Errorf("name: want 1-%d bytes of printable UTF-8", MaxNameLen))
	}
	if w.Provider != "" {
		errs = append(errs, avail.CleanPart("provider", w.Provider))
	}
	if w.Venue != "" {
		errs = append(errs, avail.CleanPart("venue", w.Venue))
		if w.Provider == "" {
			errs = append(errs, errors.New("venue requires provider: venue ids are scoped by provider"))
		}
	}
	if w.Slot != "" {
		errs = append(errs, validSlot(w))
	}
	if w.Provider == "" && w.Venue == "" && w.Slot == "" {
		errs = append(errs, errors.New("set at least one of venue, slot and provider"))
	}
	errs = append(errs, validDates(w.DateFrom, w.DateTo), validPartySizes(w.PartySizes))
	switch w.Channel {
	case notifier.ChannelWebhook:
		errs = append(errs, validWebhookURL(w.WebhookURL))
	case notifier.ChannelLog:
		if w.WebhookURL != "" {
			errs = append(errs, errors.New("webhook_url is only for the webhook channel"))
		}
	default:
		errs = append(errs, fmt.Errorf("channel %q: want %q or %q", clip.Marked(w.Channel, maxQuoted), notifier.ChannelWebhook, notifier.ChannelLog))
	}
	errs = append(errs, validWindows(w.Windows, w.TimeZone))
	errs = bounds.Check(errs, "rearm_after_minutes", w.RearmAfterMinutes, 0, MaxRearmMinutes)
	if w.Secret != "" && !subscriber.ValidSecret(w.Secret) {
		errs = append(errs, fmt.Errorf("secret: want %d-%d printable ASCII characters without spaces", MinSecretLen, MaxSecretLen))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidWatcher, err)
	}
	return nil
}

func validSlot(w Watcher) error {
	if len(w.Slot) > maxSlotLen {
		return fmt.Errorf("slot longer than %d bytes", maxSlotLen)
	}
	e, err := avail.ParseKey(w.Slot)
	if err != nil || (e.Kind != avail.EntitySlot && e.Kind != avail.EntityRestaurant) {
		return fmt.Errorf("slot %q: want an entity key provider|venue|date|time|party", clip.Marked(w.Slot, maxQuoted))
	}
	var errs []error
	for _, part := range []struct{ name, v string }{{"slot provider", e.Provider}, {"slot venue", e.Venue}, {"slot date", e.Date}} {
		errs = append(errs, avail.CleanPart(part.name, part.v))
	}
	if e.Kind == avail.EntitySlot {
		errs = append(errs, avail.CleanPart("slot time", e.Time))
	}
	if w.Provider != "" && w.Provider != e.Provider {
		errs = append(errs, fmt.Errorf("provider %q differs from the slot's %q", w.Provider, e.Provider))
	}
	if w.Venue != "" && w.Venue != e.Venue {
		errs = append(errs, fmt.Errorf("venue %q differs from the slot's %q", w.Venue, e.Venue))
	}
	return errors.Join(errs...)
}

// validDates checks an optional inclusive date range.
func validDates(from, to string) error {
	var errs []error
	var f, t time.Time
	for _, d := range []struct {
		name, v string
		out     *time.Time
	}{{"date_from", from, &f}, {"date_to", to, &t}} {
		if d.v == "" {
			continue
		}
		parsed, err := time.Parse(dateLayout, d.v)
		if err != nil || parsed.Year() < 2000 || parsed.Year() > 2100 {
			errs = append(errs, fmt.Errorf("%s %q: want YYYY-MM-DD between 2000 and 2100", d.name, clip.Marked(d.v, maxQuoted)))
			continue
		}
		*d.out = parsed
	}
	if !f.IsZero() && !t.IsZero() && t.Before(f) {
		errs = append(errs, fmt.Errorf("date_to %s is before date_from %s", to, from))
	}
	return errors.Join(errs...)
}

func validPartySizes(sizes []int) error {
	if len(sizes) > MaxPartySizes {
		return fmt.Errorf("party_sizes: at most %d sizes, got %d", MaxPartySizes, len(sizes))
	}
	for i, n := range sizes {
		if n < 1 || n > MaxPartySize {
			return fmt.Errorf("party_sizes: %d out of range 1..%d", n, MaxPartySize)
		}
		if slices.Contains(sizes[:i], n) {
			return fmt.Errorf("party_sizes: %d given twice", n)
		}
	}
	return nil
}

func validWebhookURL(s string) error {
	if s == "" {
		return errors.New("webhook_url is required for the webhook channel")
	}
	if len(s) > MaxWebhookURLLen {
		return fmt.Errorf("webhook_url longer than %d bytes", MaxWebhookURLLen)
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return fmt.Errorf("webhook_url: %w", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("webhook_url scheme %q: want http or https", clip.Marked(u.Scheme, maxQuoted))
	case u.Host == "" || u.Hostname() == "":
		return errors.New("webhook_url has no host")
	case u.User != nil:
		return errors.New("webhook_url must not carry credentials; the signature authenticates requests")
	case u.Fragment != "" || strings.ContainsAny(s, " \t\r\n"):
		return errors.New("webhook_url must not have a fragment or white space")
	}
	return nil
}

func printable(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) })
}

// maxQuoted bounds outside input quoted in an error (clip.Marked).
const maxQuoted = 64

// Matches reports whether e satisfies every filter: the final check after
// the match index.
func (w Watcher) Matches(e avail.Entity) bool {
	switch {
	case w.Slot != "" && w.Slot != e.Key,
		w.Provider != "" && w.Provider != e.Provider,
		w.Venue != "" && w.Venue != e.Venue:
		return false
	case (w.DateFrom != "" || w.DateTo != "") && e.Date == "",
		w.DateFrom != "" && e.Date < w.DateFrom,
		w.DateTo != "" && e.Date > w.DateTo:
		return false // YYYY-MM-DD strings order as dates
	case len(w.PartySizes) > 0 && !slices.Contains(w.PartySizes, e.PartySize):
		return false
	}
	return len(w.Windows) == 0 || w.inWindows(e)
}

// newWatcherID returns "w_" + 12 hex digits of Unix ms + 16 random ones.
func newWatcherID(now time.Time) string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return fmt.Sprintf("w_%012x%s", now.UnixMilli(), hex.EncodeToString(b[:]))
}

// validID reports whether s has the form of a generated watcher id.
func validID(s string) bool {
	return len(s) == 30 && strings.HasPrefix(s, "w_") && strings.Trim(s[2:], "0123456789abcdef") == ""
}

// newSecret returns "whsec_" + 64 random hex digits.
func newSecret() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return "whsec_" + hex.EncodeToString(b[:])
}

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
