// Package ratelimit is the politeness of outgoing requests shared by the
// collector (availability sources) and the feed poller: a token bucket per
// politeness domain (a provider host, a feed host) that spaces requests
// evenly and can be paused, and the parser of the Retry-After header whose
// pause it applies.
package ratelimit

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Bucket is a token bucket: rate tokens per second up to burst, taken one
// per request. Reservations may run into debt, so every caller learns at
// once when its turn comes and requests are spaced evenly. A pause (after a
// 429 or 503) holds every turn until it ends. It is safe for concurrent
// use.
type Bucket struct {
	mu          sync.Mutex
	rate        float64
	burst       float64
	tokens      float64
	last        time.Time
	pausedUntil time.Time
}

// NewBucket returns a full bucket of burst tokens refilled at rate tokens
// per second. rate must be positive and burst at least 1.
func NewBucket(rate float64, burst int) *Bucket {
	return &Bucket{rate: rate, burst: float64(burst), tokens: float64(burst)}
}

// Reserve takes one token and returns the time the request may be sent:
// now when a token is available, later otherwise (never before a pause
// ends).
func (b *Bucket) Reserve(now time.Time) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := now
	if b.pausedUntil.After(t) {
		t = b.pausedUntil
	}
	if b.last.IsZero() {
		b.last = t
	}
	if t.After(b.last) {
		b.tokens = min(b.burst, b.tokens+t.Sub(b.last).Seconds()*b.rate)
		b.last = t
	}
	b.tokens--
	if b.tokens >= 0 {
		return t
	}
	return b.last.Add(time.Duration(-b.tokens / b.rate * float64(time.Second)))
}

// Take takes one token when one is available at now and reports true;
// otherwise it takes nothing and returns how long until one is. It is the
// admission of incoming requests (refused, not queued), where Reserve
// spaces outgoing ones.
func (b *Bucket) Take(now time.Time) (time.Duration, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.last.IsZero() {
		b.last = now
	}
	if now.After(b.last) {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
		b.last = now
	}
	if b.pausedUntil.After(now) {
		return b.pausedUntil.Sub(now), false
	}
	if b.tokens >= 1 {
		b.tokens--
		return 0, true
	}
	return time.Duration((1 - b.tokens) / b.rate * float64(time.Second)), false
}

// Full reports whether the bucket holds its whole burst at now: a caller
// idle long enough that forgetting its bucket changes nothing.
func (b *Bucket) Full(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.last.IsZero() || b.tokens+now.Sub(b.last).Seconds()*b.rate >= b.burst
}

// Wait reserves a turn on the wall clock and blocks until it comes; it
// returns ctx's error when ctx ends first (the turn is then lost).
func (b *Bucket) Wait(ctx context.Context) error {
	d := time.Until(b.Reserve(time.Now()))
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Pause holds every turn until until (a Retry-After); an earlier pause
// than the current one changes nothing. Requests resume one at a time:
// credit held now is cut to one token and none accrues during the pause.
func (b *Bucket) Pause(until time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !until.After(b.pausedUntil) {
		return
	}
	b.pausedUntil = until
	b.tokens = min(b.tokens, 1)
	if until.After(b.last) {
		b.last = until
	}
}

// Paused reports whether turns are held at now, and until when.
func (b *Bucket) Paused(now time.Time) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pausedUntil, b.pausedUntil.After(now)
}

// SetRate changes the rate (positive); tokens already earned are kept.
func (b *Bucket) SetRate(rate float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.rate = rate
}

// ParseRetryAfter reads a Retry-After header value: delay seconds or an
// HTTP date (relative to now). It reports false for an absent or
// unreadable value (then the caller applies its default pause). A date in
// the past is a zero delay; a delay beyond limit, or too large to
// represent, is limit.
func ParseRetryAfter(v string, now time.Time, limit time.Duration) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" || len(v) > 64 {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		secs, err := strconv.ParseUint(v, 10, 63)
		if err != nil {
			if ne := (*strconv.NumError)(nil); errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
				return limit, true
			}
			return 0, false
		}
		if secs > uint64(limit/time.Second) {
			return limit, true
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return min(max(0, t.Sub(now)), limit), true
}
