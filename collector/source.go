package collector

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/collector/provider"
	"github.com/dropstream/dropstream/internal/bounds"
	"github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/internal/slug"
	"github.com/dropstream/dropstream/stream"
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
	if len(s.AuthToken) > MaxAuthTokenLen || strings.ContainsFunc(s.AuthToken, isControl) {
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

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

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

// NormalizerStage is the name (and default consumer group) of the
// normalizer stage.
const NormalizerStage = "avail-normalizer"

// maxRawRunPayload bounds a raw run message: the body, base64-encoded in
// JSON, plus room for the other fields.
const maxRawRunPayload = avail.MaxRawBodySize/3*4 + 8 + 64<<10

// NewNormalizer returns the "avail-normalizer" stage: one avail.Snapshot
// per raw run to topics.Snapshots. Invalid runs are dead-lettered; a
// publish failure is retried.
func NewNormalizer(topics avail.Topics, pub *stream.Publisher) stream.Stage {
	return stream.Stage{
		Name:  NormalizerStage,
		Topic: topics.Raw,
		Handler: func(ctx context.Context, m *stream.Message) error {
			snap, err := normalizeMessage(m)
			if err != nil {
				return stream.Permanent(err)
			}
			payload, err := json.Marshal(snap)
			if err != nil {
				return stream.Permanentf("encode snapshot of run %s: %w", snap.RunID, err)
			}
			out := stream.NewMessage(snap.ScopeKey, avail.TypeSnapshot, payload)
			out.SetContext(ctx)
			return pub.Publish(ctx, topics.Snapshots, out)
		},
	}
}

// normalizeMessage decodes a raw-run message and normalizes it.
func normalizeMessage(m *stream.Message) (avail.Snapshot, error) {
	if m.Type != avail.TypeRawRun {
		return avail.Snapshot{}, fmt.Errorf("message type %q, want %q", clip.Marked(m.Type, maxQuoted), avail.TypeRawRun)
	}
	if len(m.Payload) > maxRawRunPayload {
		return avail.Snapshot{}, fmt.Errorf("raw run of %d bytes exceeds %d", len(m.Payload), maxRawRunPayload)
	}
	var run avail.RawRun
	dec := json.NewDecoder(bytes.NewReader(m.Payload))
	if err := dec.Decode(&run); err != nil {
		return avail.Snapshot{}, fmt.Errorf("decode raw run: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return avail.Snapshot{}, errors.New("decode raw run: data after the JSON object")
	}
	if run.ScopeKey != m.Key {
		return avail.Snapshot{}, fmt.Errorf("raw run %s: scope key %q differs from message key %q",
			clip.Marked(run.RunID, maxQuoted), clip.Marked(run.ScopeKey, maxQuoted), clip.Marked(m.Key, maxQuoted))
	}
	return Normalize(run)
}

// Normalize turns a raw run into its snapshot through the provider's
// adapter (ErrMalformed); a failed run gives OK false.
func Normalize(run avail.RawRun) (avail.Snapshot, error) {
	if err := validateRun(run); err != nil {
		return avail.Snapshot{}, err
	}
	snap := avail.Snapshot{RunID: run.RunID, SourceID: run.SourceID, Provider: run.Provider, ScopeKey: run.ScopeKey,
		RunAt: run.FinishedAt, StartedAt: run.StartedAt, Stabilization: run.Stabilization,
		NotifyFirstSight: run.NotifyFirstSight}
	if run.Status == avail.StatusFailed {
		snap.Error = run.Error
		snap.Error = cmp.Or(snap.Error, "failed run without an error")
		return snap, nil
	}
	adapter, _ := provider.For(run.Provider) // checked by validateRun
	ents, err := adapter.Parse(run.Body, run.Scope, run.RestaurantLevel)
	if err != nil {
		return avail.Snapshot{}, fmt.Errorf("normalize run %s of source %s (scope %s, HTTP %d): %w",
			run.RunID, run.SourceID, run.ScopeKey, run.HTTPStatus, err)
	}
	snap.OK, snap.Entities = true, ents
	return snap, nil
}

// validateRun checks the fields of a raw run that later stages rely on.
func validateRun(run avail.RawRun) error {
	var errs []error
	if run.RunID == "" || len(run.RunID) > avail.MaxIDLen {
		errs = append(errs, fmt.Errorf("run id %q: want 1-%d bytes", clip.Marked(run.RunID, maxQuoted), avail.MaxIDLen))
	}
	if !validID(run.SourceID) {
		errs = append(errs, fmt.Errorf("source id %q: want 1-64 characters of [a-z0-9_-]", clip.Marked(run.SourceID, maxQuoted)))
	}
	if err := run.Scope.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("scope: %w", err))
	} else if run.ScopeKey != run.Scope.Key(run.SourceID) {
		errs = append(errs, fmt.Errorf("scope key %q is not the key of the run's source and scope", clip.Marked(run.ScopeKey, maxQuoted)))
	}
	if _, err := provider.For(run.Provider); err != nil {
		errs = append(errs, err)
	}
	if run.Status != avail.StatusOK && run.Status != avail.StatusFailed {
		errs = append(errs, fmt.Errorf("status %q: want %q or %q", clip.Marked(run.Status, maxQuoted), avail.StatusOK, avail.StatusFailed))
	}
	if len(run.Error) > 4096 {
		errs = append(errs, errors.New("error longer than 4096 bytes"))
	}
	errs = bounds.Check(errs, "stabilization", run.Stabilization, 0, MaxStabilization)
	if run.FinishedAt.IsZero() {
		errs = append(errs, errors.New("finished_at is missing"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid raw run: %w", errors.Join(errs...))
	}
	return nil
}
