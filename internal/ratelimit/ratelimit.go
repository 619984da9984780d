// Package ratelimit spaces outgoing requests per host: a pausable token
// bucket, and the parser of the Retry-After header.
package ratelimit

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/dropstream/dropstream/internal/tick"
)

// Bucket is a token bucket (golang.org/x/time/rate) that spaces requests
// evenly and can be paused after a 429 or 503. It is safe for concurrent
// use.
type Bucket struct {
	mu          sync.Mutex
	lim         *rate.Limiter
	rate        rate.Limit // applied at the next reservation, on its clock
	pausedUntil time.Time
}

// NewBucket returns a full bucket of burst tokens refilled at r tokens per
// second. r must be positive and burst at least 1.
func NewBucket(r float64, burst int) *Bucket {
	return &Bucket{lim: rate.NewLimiter(rate.Limit(r), burst), rate: rate.Limit(r)}
}

// Reserve takes one token and returns when the request may be sent.
func (b *Bucket) Reserve(now time.Time) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := now
	if b.pausedUntil.After(t) {
		t = b.pausedUntil
	}
	if b.lim.Limit() != b.rate {
		b.lim.SetLimitAt(t, b.rate)
	}
	return t.Add(b.lim.ReserveN(t, 1).DelayFrom(t))
}

// Wait reserves a turn on the wall clock and blocks until it comes; it
// returns ctx's error when ctx ends first (the turn is then lost).
func (b *Bucket) Wait(ctx context.Context) error {
	return tick.Sleep(ctx, time.Until(b.Reserve(time.Now())))
}

// Pause holds every turn until until; requests then resume one at a time.
// An earlier pause than the current one changes nothing.
func (b *Bucket) Pause(until time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !until.After(b.pausedUntil) {
		return
	}
	b.pausedUntil = until
	if n := int(b.lim.TokensAt(until)) - 1; n > 0 {
		b.lim.ReserveN(until, n)
	}
}

// Paused reports whether turns are held at now, and until when.
func (b *Bucket) Paused(now time.Time) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pausedUntil, b.pausedUntil.After(now)
}

// SetRate changes the rate (positive) from the next reservation; tokens
// already earned are kept.
func (b *Bucket) SetRate(r float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.rate = rate.Limit(r)
}

// ParseRetryAfter reads a Retry-After value (seconds or an HTTP date),
// capped at limit; false for an absent or unreadable one.
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
