package api

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/dropstream/dropstream/internal/ratelimit"
)

// Defaults of [RateLimitConfig].
const (
	// DefaultWriteRate is the sustained writes per second of one caller.
	DefaultWriteRate = 50.0
	// DefaultWriteBurst is how many writes one caller may send at once.
	DefaultWriteBurst = 500
	// DefaultMaxCallers bounds the callers whose buckets are kept.
	DefaultMaxCallers = 100_000
)

// RateLimitConfig limits the writes (POST, PUT, PATCH, DELETE) of each
// caller — each API key, or each client address when the API is open — with
// a token bucket: Burst writes at once, then Rate a second. A write beyond
// it is refused with 429 "rate_limited" and a Retry-After header. Zero
// fields take their defaults.
type RateLimitConfig struct {
	// Rate is the sustained writes per second of one caller. Default 50.
	Rate float64
	// Burst is the most writes one caller may send at once. Default 500.
	Burst int
	// MaxCallers bounds the callers tracked at once; when it is reached the
	// callers whose buckets are full again (idle) are forgotten, and while
	// none is, a new caller is refused (429). Default 100,000.
	MaxCallers int
	// Disabled turns the limit off (benches that measure throughput).
	Disabled bool
}

// WithDefaults returns c with every zero field set to its default.
func (c RateLimitConfig) WithDefaults() RateLimitConfig {
	if c.Rate == 0 {
		c.Rate = DefaultWriteRate
	}
	if c.Burst == 0 {
		c.Burst = DefaultWriteBurst
	}
	if c.MaxCallers == 0 {
		c.MaxCallers = DefaultMaxCallers
	}
	return c
}

// Validate reports every invalid field of c (zero fields are valid: they
// take their defaults), wrapped around ErrInvalidConfig.
func (c RateLimitConfig) Validate() error {
	var errs []error
	if c.Rate < 0 || math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0) {
		errs = append(errs, fmt.Errorf("%w: RateLimit.Rate %v: want a positive number of writes per second", ErrInvalidConfig, c.Rate))
	}
	if c.Burst < 0 {
		errs = append(errs, fmt.Errorf("%w: RateLimit.Burst %d is negative", ErrInvalidConfig, c.Burst))
	}
	if c.MaxCallers < 0 {
		errs = append(errs, fmt.Errorf("%w: RateLimit.MaxCallers %d is negative", ErrInvalidConfig, c.MaxCallers))
	}
	return errors.Join(errs...)
}

// callerKey is the Locals key of the caller's identity.
type callerKey struct{}

// Caller returns who sends the request, the owner of what it creates and
// the subject of its rate limit: "key:" and 16 hex digits of the SHA-256 of
// the API key that authenticated it (never the key itself), or "addr:" and
// the client's address when the route required no key or the API is open.
func Caller(c *fiber.Ctx) string {
	if id, ok := c.Locals(callerKey{}).(string); ok {
		return id
	}
	return "addr:" + c.IP()
}

// keyCaller returns the caller identity of a presented API key.
func keyCaller(presented string) string {
	d := sha256.Sum256([]byte(presented))
	return "key:" + hex.EncodeToString(d[:8])
}

// isWrite reports whether method changes something.
func isWrite(method string) bool {
	switch method {
	case fiber.MethodPost, fiber.MethodPut, fiber.MethodPatch, fiber.MethodDelete:
		return true
	}
	return false
}

// writeLimiter holds a token bucket per caller.
type writeLimiter struct {
	cfg     RateLimitConfig
	mu      sync.Mutex
	buckets map[string]*ratelimit.Bucket
}

func newWriteLimiter(cfg RateLimitConfig) *writeLimiter {
	return &writeLimiter{cfg: cfg, buckets: map[string]*ratelimit.Bucket{}}
}

// admit takes a token of caller's bucket at now, or returns how long until
// one is available.
func (l *writeLimiter) admit(caller string, now time.Time) (time.Duration, bool) {
	l.mu.Lock()
	b := l.buckets[caller]
	if b == nil {
		if len(l.buckets) >= l.cfg.MaxCallers {
			for k, old := range l.buckets {
				if old.Full(now) {
					delete(l.buckets, k)
				}
			}
		}
		if len(l.buckets) >= l.cfg.MaxCallers {
			l.mu.Unlock()
			return time.Duration(float64(time.Second) / l.cfg.Rate), false
		}
		b = ratelimit.NewBucket(l.cfg.Rate, l.cfg.Burst)
		l.buckets[caller] = b
	}
	l.mu.Unlock()
	return b.Take(now)
}

// limitWrites refuses a write beyond the caller's rate with 429
// "rate_limited" and Retry-After (whole seconds, at least 1); reads pass.
func (s *Server) limitWrites(c *fiber.Ctx) error {
	if s.limiter == nil || !isWrite(c.Method()) {
		return nil
	}
	wait, ok := s.limiter.admit(Caller(c), time.Now())
	if ok {
		return nil
	}
	secs := max(1, int(math.Ceil(wait.Seconds())))
	c.Set(fiber.HeaderRetryAfter, strconv.Itoa(secs))
	return NewError(http.StatusTooManyRequests, "rate_limited",
		fmt.Sprintf("too many writes: at most %d at once and %g a second per caller; retry in %d s", s.limiter.cfg.Burst, s.limiter.cfg.Rate, secs))
}
