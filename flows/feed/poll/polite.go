package poll

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// bucket is a per-host token bucket: rate tokens per second up to burst,
// one per request; a pause (after 429/503) holds every turn until it ends.
type bucket struct {
	mu          sync.Mutex
	rate        float64
	burst       float64
	tokens      float64
	last        time.Time
	pausedUntil time.Time
}

// reserve takes a token and returns when the request may go.
func (b *bucket) reserve(now time.Time) time.Time {
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

// wait blocks until the caller's turn or ctx ends.
func (b *bucket) wait(ctx context.Context) error {
	d := time.Until(b.reserve(time.Now()))
	if d <= 0 {
		return nil
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

// pause holds every turn until until; requests then resume one at a time.
func (b *bucket) pause(until time.Time) {
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

// parseRetryAfter reads a Retry-After header: delay seconds or an HTTP date
// relative to now; false when absent or unreadable. Capped at limit.
func parseRetryAfter(v string, now time.Time, limit time.Duration) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" || len(v) > 64 {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		secs, err := strconv.ParseUint(v, 10, 63)
		if err != nil {
			return limit, strings.Contains(err.Error(), "range")
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
