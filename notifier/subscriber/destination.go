package subscriber

import (
	"cmp"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/mail"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // time zones without the system database

	"github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/notifier/digest"
)

// Destination statuses.
const (
	// StatusPending: awaiting opt-in; it receives only its confirmation
	// request and is removed after ExpiresAt.
	StatusPending = "pending"
	// StatusActive: confirmed; it receives notifications.
	StatusActive = "active"
)

// Limits on outside input.
const (
	MaxAddressLen     = 2048
	MaxDestinations   = 8
	MinSecretLen      = 16
	MaxSecretLen      = 256
	maxEmailLocalPart = 64
)

// ErrInvalid is wrapped by every validation error.
var ErrInvalid = errors.New("subscriber: invalid")

// Destination is where a subscriber is reached, of a registered Kind.
type Destination struct {
	// ID is set by the store: "d" + 16 hex digits.
	ID string `json:"id" openapi:"readonly"`
	// Kind names a registered Kind (KindEmail, KindWebhook, KindSlack, …).
	Kind string `json:"kind"`
	// Address is the email address or the URL.
	Address string `json:"address"`
	// Secret signs deliveries of kinds with Kind.Secret; generated when
	// empty, shown only at creation.
	Secret string `json:"secret,omitempty" openapi:"readonly"`
	// UnsubscribeToken is the unsubscribe link's token, set on
	// confirmation; never shown by Get or List.
	UnsubscribeToken string `json:"unsubscribe_token,omitempty" openapi:"readonly"`
	// Status is StatusPending or StatusActive.
	Status string `json:"status" openapi:"readonly"`
	// CreatedAt, ConfirmedAt and ExpiresAt (pending only) are set by the store.
	CreatedAt   time.Time `json:"created_at" openapi:"readonly"`
	ConfirmedAt time.Time `json:"confirmed_at,omitzero" openapi:"readonly"`
	ExpiresAt   time.Time `json:"expires_at,omitzero" openapi:"readonly"`
}

// Channel returns d's kind's channel; "webhook" for an unregistered kind.
func (d Destination) Channel() string {
	if k, ok := LookupKind(d.Kind); ok {
		return k.Channel
	}
	return "webhook"
}

// Core returns the destination's identity, unique across subscribers, from
// its kind's Core. Errors wrap ErrInvalid.
func (d Destination) Core() (string, error) {
	k, ok := LookupKind(d.Kind)
	if !ok {
		return "", errUnknownKind(d.Kind)
	}
	return k.Core(d.Address)
}

// CoreHash is the hex SHA-256 of the core, as keys and history name it.
func CoreHash(core string) string {
	sum := sha256.Sum256([]byte(core))
	return hex.EncodeToString(sum[:16])
}

// Validate reports why d cannot be created; store-set fields are ignored.
func (d Destination) Validate() error {
	if _, err := d.Core(); err != nil {
		return err
	}
	if d.Secret != "" && !ValidSecret(d.Secret) {
		return fmt.Errorf("%w: secret: want %d-%d printable ASCII characters without spaces", ErrInvalid, MinSecretLen, MaxSecretLen)
	}
	if k, _ := LookupKind(d.Kind); !k.Secret && d.Secret != "" {
		return errNoSecret(d.Kind)
	}
	return nil
}

func normalizeEmail(s string) (string, error) {
	if len(s) == 0 || len(s) > 254 {
		return "", fmt.Errorf("%w: email address: want 1-254 bytes", ErrInvalid)
	}
	a, err := mail.ParseAddress(s)
	if err != nil || a.Name != "" || a.Address != strings.TrimSpace(s) {
		return "", fmt.Errorf("%w: email address %q: want a bare address like name@example.com", ErrInvalid, clip.Marked(s, maxQuoted))
	}
	local, domain, ok := strings.Cut(a.Address, "@")
	if !ok || local == "" || len(local) > maxEmailLocalPart || !strings.Contains(domain, ".") || strings.ContainsAny(a.Address, " \t\r\n<>") {
		return "", fmt.Errorf("%w: email address %q: want name@domain.tld", ErrInvalid, clip.Marked(s, maxQuoted))
	}
	return strings.ToLower(local) + "@" + strings.ToLower(domain), nil
}

func normalizeURL(s string) (string, error) {
	if s == "" || len(s) > MaxAddressLen {
		return "", fmt.Errorf("%w: url: want 1-%d bytes", ErrInvalid, MaxAddressLen)
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "", fmt.Errorf("%w: url: %w", ErrInvalid, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("%w: url scheme %q: want http or https", ErrInvalid, clip.Marked(u.Scheme, maxQuoted))
	case u.Hostname() == "":
		return "", fmt.Errorf("%w: url has no host", ErrInvalid)
	case u.User != nil:
		return "", fmt.Errorf("%w: url must not carry credentials", ErrInvalid)
	case strings.ContainsAny(s, " \t\r\n"):
		return "", fmt.Errorf("%w: url must not contain white space", ErrInvalid)
	}
	scheme, host := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname())
	if p := u.Port(); p != "" && !(scheme == "http" && p == "80" || scheme == "https" && p == "443") {
		host += ":" + p
	} else if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	out := scheme + "://" + host + path
	if u.RawQuery != "" {
		out += "?" + u.RawQuery
	}
	return out, nil
}

// ValidSecret reports whether s is a signing secret: MinSecretLen to
// MaxSecretLen visible ASCII characters.
func ValidSecret(s string) bool {
	return len(s) >= MinSecretLen && len(s) <= MaxSecretLen && !strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r > '~' })
}

// randomHex returns n random bytes as hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// maxQuoted bounds outside input quoted in an error (clip.Marked).
const maxQuoted = 64

// Kind is a kind of destination: how its address is checked, whether it
// has a secret, which channel sends to it. Built in: email, webhook, slack;
// flows add theirs with notifier.Flow.RegisterKind.
type Kind struct {
	// Name is the stored value of Destination.Kind; it never changes.
	Name string
	// Channel names the notifier channel that delivers to the kind.
	Channel string
	// Core checks an address and returns its unique identity; errors wrap
	// ErrInvalid. See EmailCore and URLCore.
	Core func(address string) (string, error)
	// Secret says destinations carry a signing secret (generated if absent).
	Secret bool
}

// The built-in destination kinds.
const (
	// KindEmail is an email address, delivered over SMTP.
	KindEmail = "email"
	// KindWebhook is an http(s) URL receiving signed JSON.
	KindWebhook = "webhook"
	// KindSlack is a Slack-style incoming webhook URL receiving {"text": …}.
	KindSlack = "slack"
)

// kinds is the registry of destination kinds, in registration order.
var kinds = struct {
	sync.RWMutex
	list []Kind
}{list: []Kind{
	{Name: KindEmail, Channel: "email", Core: EmailCore},
	{Name: KindWebhook, Channel: "webhook", Core: URLCore, Secret: true},
	{Name: KindSlack, Channel: "slack", Core: URLCore, Secret: true},
}}

// RegisterKind adds a destination kind process-wide. Registering the same
// definition again does nothing; another under a taken name is an error.
func RegisterKind(k Kind) error {
	if k.Name == "" || len(k.Name) > 64 || !printable(k.Name) || k.Channel == "" || k.Core == nil {
		return fmt.Errorf("subscriber: kind %q needs a name of 1-64 bytes, a channel and a Core", clip.Marked(k.Name, maxQuoted))
	}
	kinds.Lock()
	defer kinds.Unlock()
	for _, o := range kinds.list {
		if o.Name != k.Name {
			continue
		}
		if o.Channel == k.Channel && o.Secret == k.Secret && reflect.ValueOf(o.Core).Pointer() == reflect.ValueOf(k.Core).Pointer() {
			return nil
		}
		return fmt.Errorf("subscriber: kind %q registered twice, differently", k.Name)
	}
	kinds.list = append(kinds.list, k)
	return nil
}

// LookupKind returns the registered kind named name.
func LookupKind(name string) (Kind, bool) {
	kinds.RLock()
	defer kinds.RUnlock()
	for _, k := range kinds.list {
		if k.Name == name {
			return k, true
		}
	}
	return Kind{}, false
}

// Kinds returns the registered kinds, in registration order.
func Kinds() []Kind {
	kinds.RLock()
	defer kinds.RUnlock()
	return append([]Kind(nil), kinds.list...)
}

// errUnknownKind lists the registered kinds.
func errUnknownKind(name string) error {
	all := Kinds()
	names := make([]string, len(all))
	for i, k := range all {
		names[i] = k.Name
	}
	want := names[len(names)-1]
	if len(names) > 1 {
		want = strings.Join(names[:len(names)-1], ", ") + " or " + want
	}
	return fmt.Errorf("%w: destination kind %q: want %s", ErrInvalid, clip.Marked(name, maxQuoted), want)
}

// EmailCore is "email:" + the address lower-cased.
func EmailCore(address string) (string, error) {
	addr, err := normalizeEmail(address)
	if err != nil {
		return "", err
	}
	return "email:" + addr, nil
}

// URLCore is "url:" + the http(s) URL normalized (scheme and host
// lower-cased; default port, fragment, trailing slash dropped). Every URL
// kind shares it, so an endpoint is subscribed once.
func URLCore(address string) (string, error) {
	u, err := normalizeURL(address)
	if err != nil {
		return "", err
	}
	return "url:" + u, nil
}

// errNoSecret is the error of a secret given to a kind that takes none.
func errNoSecret(kind string) error {
	article := "a"
	if kind != "" && strings.ContainsRune("aeiou", rune(kind[0])) {
		article = "an"
	}
	return fmt.Errorf("%w: %s %s destination takes no secret", ErrInvalid, article, clip.Marked(kind, maxQuoted))
}

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
	match := func(pat string) bool { return matchPattern(pat, subject) }
	return !slices.ContainsFunc(p.Exclude, match) && (len(p.Include) == 0 || slices.ContainsFunc(p.Include, match))
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
