package collector

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/collector/provider"
	"github.com/dropstream/dropstream/internal/bounds"
	"github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/internal/slug"
)

// Source defaults and bounds.
const (
	DefaultInterval      = 60 * time.Second
	MinInterval          = time.Second
	MaxInterval          = 24 * time.Hour
	DefaultStabilization = 2
	MaxStabilization     = 10
	// DefaultRateLimit is the default requests per second per provider host.
	DefaultRateLimit = 5.0
	// MaxRateLimit bounds RateLimit.
	MaxRateLimit = 1000.0
	// MaxBaseURLLen bounds BaseURL.
	MaxBaseURLLen = 2048
	// MaxAuthTokenLen bounds AuthToken.
	MaxAuthTokenLen = 4096
)

// Source is a provider at a base URL, asked for each of its scopes every
// Interval (in JSON a duration such as "90s"). Zero fields take defaults.
type Source struct {
	// ID names the source: 1-64 characters of [a-z0-9_-].
	ID string `json:"id"`
	// Tenant is the caller's tenant, set by the API; none is tenancy.Open.
	Tenant string `json:"tenant,omitempty" openapi:"readonly"`
	// Provider is the adapter: "resy", "opentable" or "simulator".
	Provider string `json:"provider"`
	// BaseURL is the provider's http or https URL, with a host and possibly
	// a path prefix, without credentials, query or fragment.
	BaseURL string `json:"base_url"`
	// Scopes are what each poll asks for: 1..avail.MaxScopes distinct valid
	// scopes the provider accepts.
	Scopes []avail.Scope `json:"scopes"`
	// Interval between polls of a scope, MinInterval..MaxInterval. Default 60s.
	Interval time.Duration `json:"-"`
	// Stabilization is the consecutive runs confirming a flip, 1..10. Default 2.
	Stabilization int `json:"stabilization,omitempty"`
	// NotifyFirstSight makes the first run of a scope notify.
	NotifyFirstSight bool `json:"notify_first_sight,omitempty"`
	// RestaurantLevel keys entities by venue (avail.RestaurantKey), not slot.
	RestaurantLevel bool `json:"restaurant_level,omitempty"`
	// AuthToken, when set, is sent as "Authorization: Bearer <token>". It
	// is a secret: use Redacted before showing a source.
	AuthToken string `json:"auth_token,omitempty"`
	// RateLimit is requests per second to the provider host, (0,
	// MaxRateLimit]; sources of one host share the smallest. Default 5.
	RateLimit float64 `json:"rate_limit,omitempty"`
}

// sourceJSON is Source on the wire: Interval as a duration string.
type sourceJSON struct {
	sourceFields
	Interval string `json:"interval,omitempty"`
}

// sourceFields has Source's fields without its methods.
type sourceFields Source

// JSONShape returns a value of the type whose fields are Source's JSON
// (Interval as a duration string), for the API's OpenAPI document.
func (Source) JSONShape() any { return sourceJSON{} }

// MarshalJSON encodes the source with Interval as a duration string.
func (s Source) MarshalJSON() ([]byte, error) {
	out := sourceJSON{sourceFields: sourceFields(s)}
	if s.Interval != 0 {
		out.Interval = s.Interval.String()
	}
	return json.Marshal(out)
}

// UnmarshalJSON decodes strictly (errors wrap ErrInvalidSource), unvalidated.
func (s *Source) UnmarshalJSON(b []byte) error {
	var in sourceJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidSource, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: data after the source object", ErrInvalidSource)
	}
	out := Source(in.sourceFields)
	if in.Interval != "" {
		d, err := time.ParseDuration(in.Interval)
		if err != nil {
			return fmt.Errorf("%w: interval %q: want a duration such as \"60s\"", ErrInvalidSource, in.Interval)
		}
		out.Interval = d
	}
	*s = out
	return nil
}

// WithDefaults returns s with zero Interval, Stabilization and RateLimit defaulted.
func (s Source) WithDefaults() Source {
	s.Interval = cmp.Or(s.Interval, DefaultInterval)
	s.Stabilization = cmp.Or(s.Stabilization, DefaultStabilization)
	s.RateLimit = cmp.Or(s.RateLimit, DefaultRateLimit)
	return s
}

// Validate reports every problem of a defaulted source, wrapping ErrInvalidSource.
func (s Source) Validate() error {
	s = s.WithDefaults()
	var errs []error
	if !validID(s.ID) {
		errs = append(errs, fmt.Errorf("id %q: want 1-64 characters of [a-z0-9_-]", clip.Marked(s.ID, maxQuoted)))
	}
	adapter, err := provider.For(s.Provider)
	errs = append(errs, err, validateBaseURL(s.BaseURL)) // errors.Join drops the nils
	errs = append(errs, validateScopes(s.Scopes, s.ID, adapter)...)
	errs = bounds.Check(errs, "interval", s.Interval, MinInterval, MaxInterval)
	errs = bounds.Check(errs, "stabilization", s.Stabilization, 1, MaxStabilization)
	if !(s.RateLimit > 0 && s.RateLimit <= MaxRateLimit) {
		errs = append(errs, fmt.Errorf("rate limit %v out of range (0, %v] requests/s", s.RateLimit, MaxRateLimit))
	}
	if len(s.AuthToken) > MaxAuthTokenLen || clip.HasControl(s.AuthToken) {
		errs = append(errs, fmt.Errorf("auth token longer than %d bytes or with control characters", MaxAuthTokenLen))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w %q: %w", ErrInvalidSource, clip.Marked(s.ID, maxQuoted), err)
	}
	return nil
}

func validateScopes(scopes []avail.Scope, id string, adapter provider.Adapter) []error {
	var errs []error
	if len(scopes) == 0 || len(scopes) > avail.MaxScopes {
		return []error{fmt.Errorf("%d scopes: want 1..%d", len(scopes), avail.MaxScopes)}
	}
	seen := make(map[string]bool, len(scopes))
	for i, sc := range scopes {
		if err := sc.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("scope %d: %w", i, err))
			continue
		}
		if adapter != nil {
			if err := adapter.ValidateScope(sc); err != nil {
				errs = append(errs, fmt.Errorf("scope %d: %w", i, err))
			}
		}
		if k := sc.Key(id); seen[k] {
			errs = append(errs, fmt.Errorf("scope %d duplicates an earlier scope", i))
		} else {
			seen[k] = true
		}
	}
	return errs
}

func validateBaseURL(raw string) error {
	if len(raw) > MaxBaseURLLen {
		return fmt.Errorf("base URL longer than %d bytes", MaxBaseURLLen)
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return fmt.Errorf("base URL: %w", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("base URL %q: want http or https", clip.Marked(raw, maxQuoted))
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("base URL %q has no host", clip.Marked(raw, maxQuoted))
	case u.User != nil:
		return errors.New("base URL must not carry credentials; use auth_token")
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return fmt.Errorf("base URL %q must not have a query or fragment", clip.Marked(raw, maxQuoted))
	}
	return nil
}

// validID reports a source id: 1..avail.MaxIDLen characters of [a-z0-9_-].
func validID(s string) bool { return slug.Valid(s, avail.MaxIDLen) }

// maxQuoted bounds outside input quoted in an error (clip.Marked).
const maxQuoted = 80

// Redacted returns s safe to show: a set AuthToken becomes "redacted".
func (s Source) Redacted() Source {
	if s.AuthToken != "" {
		s.AuthToken = "redacted"
	}
	s.Scopes = append([]avail.Scope(nil), s.Scopes...)
	return s
}

// Fingerprint is the hex SHA-256 of the source's JSON.
func (s Source) Fingerprint() string {
	b, _ := json.Marshal(s.WithDefaults())
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

var (
	// ErrInvalidSource is wrapped by every error of Source.Validate and of
	// decoding a source.
	ErrInvalidSource = errors.New("invalid source")
	// ErrSourceNotFound reports a source id that is not known.
	ErrSourceNotFound = errors.New("source not found")
	// ErrSourceTaken reports a source id another tenant's source holds.
	ErrSourceTaken = errors.New("source id taken")
	// ErrAuthExpired reports a source paused because its provider refused its
	// credentials (401, 403) until its configuration changes.
	ErrAuthExpired = errors.New("source credentials expired")
	// ErrMalformed is wrapped by errors reporting a provider response that
	// does not describe availability (see provider.ErrMalformed).
	ErrMalformed = provider.ErrMalformed
)
