package stream

import (
	"time"

	"github.com/cenkalti/backoff/v5"
)

// NewBackoff returns the repository's one backoff policy, cenkalti/backoff's
// exponential one: pauses start at first and double up to max, each drawn
// within ±randomization of its value (0: exact). Reset starts it again.
func NewBackoff(first, max time.Duration, randomization float64) *backoff.ExponentialBackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.Multiplier, b.RandomizationFactor = first, max, 2, randomization
	b.Reset()
	return b
}

// BackoffAfter is NewBackoff's exact pause after n failures (n ≥ 1), first
// doubled n-1 times up to max, for code that stores an attempt count.
func BackoffAfter(n int, first, max time.Duration) time.Duration {
	b := NewBackoff(first, max, 0)
	d := b.NextBackOff()
	for i := 1; i < n && d < max; i++ {
		d = b.NextBackOff()
	}
	return min(d, max)
}
