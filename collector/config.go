package collector

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/egress"
	"github.com/dropstream/dropstream/internal/settings"
	"github.com/dropstream/dropstream/stream"
)

// CollectorConfig tunes a Collector. Zero fields take their defaults.
type CollectorConfig struct {
	// Jitter scales each interval by a random factor in [1-Jitter,
	// 1+Jitter], up to 0.5. Default 0.1; NoJitter for exact intervals.
	Jitter float64 `default:"0.1"`
	// NoJitter turns jitter off.
	NoJitter bool
	// Timeout bounds one request, response body included. Default 10s.
	Timeout time.Duration `default:"10s"`
	// DownAfter is the consecutive failed runs that make a source down. Default 3.
	DownAfter int `default:"3" range:"1..1000"`
	// MaxBackoff caps a failing scope's delay, doubled per failure. Default 10m.
	MaxBackoff time.Duration `default:"10m"`
	// MaxRetryAfter caps the pause a Retry-After can impose. Default 1h.
	MaxRetryAfter time.Duration `default:"1h"`
	// DefaultRetryAfter is the pause after a 429 without Retry-After. Default 30s.
	DefaultRetryAfter time.Duration `default:"30s"`
	// Burst is the token-bucket size per provider host. Default 1 (even spacing).
	Burst int `default:"1" range:"1..1000"`
	// Concurrency is the number of polls in flight in Run. Default 4.
	Concurrency int `default:"4" range:"1..1024"`
	// RefreshInterval is how often Run reloads sources from Store. Default 15s.
	RefreshInterval time.Duration `default:"15s"`
	// Store, if set, is the source of truth Run reloads; nil: Upsert and Remove.
	Store *Store
	// Shared, when set, lets copies share sources on this Redis: one copy
	// polls a scope at a time and health counts all. Default: alone.
	Shared redis.UniversalClient
	// Owner names this copy in Shared gates. Default stream.DefaultConsumerName().
	Owner string
	// UserAgent is sent with every request. Default
	// "dropstream-collector/1 (+https://github.com/dropstream/dropstream)".
	UserAgent string
	// Egress is the connections' policy. Default: egress.Default().
	Egress *egress.Policy
	// HTTPClient sends the requests and must keep to an egress policy.
	// Default: over Egress, redirects within the host only.
	HTTPClient *http.Client
	// Releases polls in bursts around learned release times. Default: off.
	Releases ReleaseConfig
	// Clock is the source of time. Default SystemClock.
	Clock Clock
	// Telemetry supplies providers and the logger (nil: the globals).
	Telemetry stream.Telemetry
}

// DefaultUserAgent is the default CollectorConfig.UserAgent.
const DefaultUserAgent = "dropstream-collector/1 (+https://github.com/dropstream/dropstream)"

// WithDefaults returns c with every zero field set to its default.
func (c CollectorConfig) WithDefaults() CollectorConfig {
	settings.Defaults(&c)
	c.UserAgent = cmp.Or(c.UserAgent, DefaultUserAgent)
	c.Egress = cmp.Or(c.Egress, egress.Default())
	c.HTTPClient = cmp.Or(c.HTTPClient, defaultHTTPClient(c.Egress))
	c.Clock = cmp.Or[Clock](c.Clock, SystemClock{})
	c.Releases = c.Releases.WithDefaults()
	if c.Shared != nil && c.Owner == "" {
		c.Owner = stream.DefaultConsumerName()
	}
	return c
}

// Validate reports every invalid field of a defaulted config.
func (c CollectorConfig) Validate() error {
	errs := []error{settings.Check("", &c)}
	if !(c.Jitter > 0 && c.Jitter <= 0.5) {
		errs = append(errs, fmt.Errorf("jitter %v out of range (0, 0.5]", c.Jitter))
	}
	if c.Timeout <= 0 || c.MaxBackoff <= 0 || c.MaxRetryAfter <= 0 || c.DefaultRetryAfter <= 0 || c.RefreshInterval <= 0 {
		errs = append(errs, errors.New("timeout, max backoff, retry-after and refresh interval must be positive"))
	}
	if c.DefaultRetryAfter > c.MaxRetryAfter {
		errs = append(errs, fmt.Errorf("default retry-after %s exceeds max retry-after %s", c.DefaultRetryAfter, c.MaxRetryAfter))
	}
	if len(c.UserAgent) > 256 {
		errs = append(errs, errors.New("user agent longer than 256 bytes"))
	}
	errs = append(errs, c.Releases.Validate())
	if c.HTTPClient == nil || c.Clock == nil {
		errs = append(errs, errors.New("HTTP client and clock must be set"))
	}
	return errors.Join(errs...)
}

// defaultHTTPClient returns a client over policy that follows at most 3
// redirects within the host, so the bearer token stays there.
func defaultHTTPClient(policy *egress.Policy) *http.Client {
	return &http.Client{
		Transport: policy.Transport(),
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 3 {
				return errors.New("stopped after 3 redirects")
			}
			if req.URL.Host != via[0].URL.Host {
				return fmt.Errorf("redirect to another host %q refused", req.URL.Host)
			}
			return policy.CheckRedirect(req)
		},
	}
}
