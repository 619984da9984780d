package feed

import (
	"slices"
	"time"

	"github.com/dropstream/dropstream/flows/feed/poll"
	"github.com/dropstream/dropstream/internal/settings"
	"github.com/dropstream/dropstream/stream"
)

// EtiquetteConfig bounds how the poller honours what each feed asks for
// and how it adapts to each feed. Zero fields take their defaults.
type EtiquetteConfig struct {
	// MinInterval is the shortest adaptive interval (a shorter PollEvery
	// stays the floor). Default 1m.
	MinInterval time.Duration `default:"1m" range:"1s..168h"`
	// MaxInterval caps every delay taken from a feed: cache headers, <ttl>,
	// skip hours and days, and the adaptive interval. Default 24h.
	MaxInterval time.Duration `default:"24h" range:"MinInterval..720h"`
	// History is how many latest arrivals the adaptive interval uses; it
	// adapts from the third on. Default 16.
	History int `default:"16" range:"3..1000"`
	// HostSpacing is the least time between two requests to one host across
	// every poller copy (pollgate.Pacer). Default 200ms.
	HostSpacing time.Duration `default:"200ms" range:"1ms..1h"`
	// DeadAfter is how many failed polls in a row halt a feed as dead; its
	// subscribers are told once. Default 10.
	DeadAfter int `default:"10" range:"1..10000"`
}

// WithDefaults returns c with every zero field set to its default.
func (c EtiquetteConfig) WithDefaults() EtiquetteConfig {
	settings.Defaults(&c)
	return c
}

// Validate reports every invalid field of a defaulted config.
func (c EtiquetteConfig) Validate() error {
	return settings.Check("feed etiquette", &c)
}

// Reasons of a scheduled delay, as FeedStats.IntervalReason shows them.
const (
	ReasonInterval   = "interval"    // the feed's PollEvery
	ReasonAdaptive   = "adaptive"    // from the feed's arrivals
	ReasonFresh      = "fresh"       // Cache-Control max-age or Expires
	ReasonTTL        = "ttl"         // RSS <ttl>
	ReasonSkip       = "skip"        // RSS <skipHours>/<skipDays>
	ReasonPush       = "push"        // WebSub: polled as a fallback only
	ReasonBackoff    = "backoff"     // consecutive failures
	ReasonRetryAfter = "retry_after" // the server's Retry-After
)

// schedule is what the next poll of a feed is chosen from.
type schedule struct {
	every      time.Duration // the feed's PollEvery
	hints      poll.Hints
	arrivals   []time.Time // newest first
	now        time.Time
	failures   int
	retryAfter time.Duration
	maxBackoff time.Duration
	// fallback is the polling interval of a feed whose content is pushed
	// (an active WebSub subscription); 0 when none.
	fallback time.Duration
}

// next returns the delay to a feed's next poll and its reason: backoff or
// Retry-After after failures, else the adaptive interval within the
// feed's hints, capped at MaxInterval.
func (c EtiquetteConfig) next(s schedule) (time.Duration, string) {
	if s.failures > 0 {
		d := stream.BackoffAfter(s.failures+1, s.every, s.maxBackoff)
		if s.retryAfter > d {
			return s.retryAfter, ReasonRetryAfter
		}
		return d, ReasonBackoff
	}
	d, reason := c.adaptive(s.every, s.arrivals, s.now)
	if f := min(s.hints.FreshFor, c.MaxInterval); f > d {
		d, reason = f, ReasonFresh
	}
	if t := min(s.hints.TTL, c.MaxInterval); t > d {
		d, reason = t, ReasonTTL
	}
	if s.fallback > d {
		d, reason = s.fallback, ReasonPush
	}
	if skipped := c.skip(s.now, d, s.hints); skipped > d {
		d, reason = skipped, ReasonSkip
	}
	if s.retryAfter > d {
		d, reason = s.retryAfter, ReasonRetryAfter
	}
	return d, reason
}

// adaptive is half the larger of the median gap between arrivals and the
// time since the last, within [min(MinInterval, every), MaxInterval].
func (c EtiquetteConfig) adaptive(every time.Duration, arrivals []time.Time, now time.Time) (time.Duration, string) {
	if len(arrivals) < 3 {
		return every, ReasonInterval
	}
	gaps := make([]time.Duration, 0, len(arrivals)-1)
	for i := 1; i < len(arrivals); i++ {
		gaps = append(gaps, arrivals[i-1].Sub(arrivals[i]).Abs())
	}
	slices.Sort(gaps)
	typical := max(gaps[len(gaps)/2], now.Sub(arrivals[0]))
	return min(max(typical/2, min(c.MinInterval, every)), c.MaxInterval), ReasonAdaptive
}

// skip returns the delay from now, at least d, to the first time outside
// the feed's skipped hours (UTC) and days; at most MaxInterval.
func (c EtiquetteConfig) skip(now time.Time, d time.Duration, h poll.Hints) time.Duration {
	if len(h.SkipHours) == 0 && len(h.SkipDays) == 0 {
		return d
	}
	at := now.Add(d).UTC()
	for range 8 * 24 {
		if !slices.Contains(h.SkipHours, at.Hour()) && !slices.Contains(h.SkipDays, at.Weekday()) {
			break
		}
		at = at.Truncate(time.Hour).Add(time.Hour)
	}
	return min(at.Sub(now), max(d, c.MaxInterval))
}
