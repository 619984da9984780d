package api

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"golang.org/x/time/rate"
)

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

// bucketKey names one bucket: a caller's, for one class.
type bucketKey struct {
	caller string
	class  Class
}

// limiter holds a token bucket per caller and class.
type limiter struct {
	cfg     RateLimitConfig // with defaults
	mu      sync.Mutex
	buckets map[bucketKey]*rate.Limiter
}

func newLimiter(cfg RateLimitConfig) *limiter {
	return &limiter{cfg: cfg, buckets: map[bucketKey]*rate.Limiter{}}
}

// limitFor is the limit of class for a caller whose key carries own.
func (l *limiter) limitFor(class Class, own KeyLimits) Limit {
	lim := l.cfg.Of(class)
	if own.Rate > 0 {
		lim.Rate = own.Rate
	}
	if own.Burst > 0 {
		lim.Burst = own.Burst
	}
	return lim
}

// admit takes a token of k's bucket at now, created with lim if it is
// new, or returns how long until one is available.
func (l *limiter) admit(k bucketKey, lim Limit, now time.Time) (time.Duration, bool) {
	l.mu.Lock()
	b := l.buckets[k]
	if b == nil {
		if len(l.buckets) >= l.cfg.MaxBuckets {
			for k, old := range l.buckets {
				if old.TokensAt(now) >= float64(old.Burst()) {
					delete(l.buckets, k)
				}
			}
		}
		if len(l.buckets) >= l.cfg.MaxBuckets {
			l.mu.Unlock()
			return time.Duration(float64(time.Second) / lim.Rate), false
		}
		b = rate.NewLimiter(rate.Limit(lim.Rate), lim.Burst)
		l.buckets[k] = b
	}
	l.mu.Unlock()
	if b.AllowN(now, 1) {
		return 0, true
	}
	missing := 1 - b.TokensAt(now)
	return time.Duration(missing / lim.Rate * float64(time.Second)), false
}

// limit refuses a request beyond its caller's limit for class with 429
// "rate_limited" and Retry-After (whole seconds, at least 1). ClassUnset
// takes the class of the request's method (see methodClass).
func (s *Server) limit(c *fiber.Ctx, class Class) error {
	if s.limiter == nil {
		return nil
	}
	if class == ClassUnset {
		class = methodClass(c.Method())
	}
	class = class.effective()
	lim := s.limiter.limitFor(class, CallerLimits(c))
	wait, ok := s.limiter.admit(bucketKey{caller: Caller(c), class: class}, lim, time.Now())
	if ok {
		return nil
	}
	secs := max(1, int(math.Ceil(wait.Seconds())))
	c.Set(fiber.HeaderRetryAfter, strconv.Itoa(secs))
	return NewError(http.StatusTooManyRequests, "rate_limited",
		fmt.Sprintf("too many %s requests: at most %d at once and %g a second per caller; retry in %d s", class, lim.Burst, lim.Rate, secs))
}

// methodClass is the class of a route registered without an [Operation]
// (through [Server.Group]): ClassRead for GET and HEAD, else ClassCreate.
func methodClass(method string) Class {
	if method == fiber.MethodGet || method == fiber.MethodHead {
		return ClassRead
	}
	return ClassCreate
}

// limitAs returns the handler limiting a route that needs no key to class.
func (s *Server) limitAs(class Class) fiber.Handler {
	return func(c *fiber.Ctx) error {
		if err := s.limit(c, class); err != nil {
			return err
		}
		return c.Next()
	}
}
