package stream

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/redis/go-redis/v9"
)

// IsUnavailable reports whether err says Redis cannot serve for now (a
// refused, reset or timed-out connection, an exhausted pool, a server
// loading, a replica during a failover, a slot without a master) rather
// than that a command failed: callers answer "try again later" (503).
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var op *net.OpError
	if errors.Is(err, ErrNotReplicated) || errors.As(err, &op) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrClosed) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	msg := err.Error()
	return slices.ContainsFunc([]string{"LOADING ", "READONLY ", "CLUSTERDOWN ", "MASTERDOWN ", "TRYAGAIN "},
		func(p string) bool { return strings.HasPrefix(msg, p) || strings.Contains(msg, ": "+p) }) ||
		strings.Contains(msg, "connection refused") || strings.Contains(msg, "i/o timeout") ||
		strings.Contains(msg, "unexpected read from socket") // go-redis: a pooled connection with stray data
}

// Pauses between calls of RetryUnavailable: doubling, each within ±50 %.
const (
	unavailableFirstPause = 50 * time.Millisecond
	unavailableMaxPause   = time.Second
)

// RetryUnavailable calls op again after a pause while it fails with an
// IsUnavailable error and budget has not passed since the first call. It
// returns op's first other outcome, or its last when the budget is spent or
// ctx ends (with ctx's error). A budget of 0 or less calls op once. Only an
// idempotent op may be retried so: a call whose reply was lost may have
// been applied.
func RetryUnavailable[T any](ctx context.Context, budget time.Duration, op func() (T, error)) (T, error) {
	if budget <= 0 {
		return op()
	}
	b := NewBackoff(unavailableFirstPause, unavailableMaxPause, 0.5)
	return backoff.Retry(ctx, func() (T, error) {
		v, err := op()
		if err != nil && !IsUnavailable(err) {
			return v, backoff.Permanent(err)
		}
		return v, err
	}, backoff.WithBackOff(b), backoff.WithMaxElapsedTime(budget))
}

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
