package collector

import (
	"net/url"
	"sync"
	"time"
)

// bucket is a token bucket: rate tokens per second up to burst, taken one
// per request. Reservations may run into debt, so every caller learns at
// once when its turn comes and requests are spaced evenly. A pause (after a
// 429) holds every turn until it ends.
type bucket struct {
	mu          sync.Mutex
	rate        float64
	burst       float64
	tokens      float64
	last        time.Time
	pausedUntil time.Time
}

func newBucket(rate float64, burst int) *bucket {
	return &bucket{rate: rate, burst: float64(burst), tokens: float64(burst)}
}

// reserve takes one token and returns the time the request may be sent:
// now when a token is available, later otherwise.
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

// pause holds every turn until until (a Retry-After). Requests resume one
// at a time: credit held now is cut to one token and none accrues during
// the pause.
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

// paused reports whether turns are held at now, and until when.
func (b *bucket) paused(now time.Time) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pausedUntil, b.pausedUntil.After(now)
}

// setRate changes the rate; tokens already earned are kept.
func (b *bucket) setRate(rate float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.rate = rate
}

// bucketKey is the politeness domain of a source: its provider and its
// base URL's host.
func bucketKey(src Source) string {
	host := src.BaseURL
	if u, err := url.Parse(src.BaseURL); err == nil {
		host = u.Host
	}
	return src.Provider + " " + host
}
