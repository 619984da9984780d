package stream

import (
	"context"
	"time"

	"github.com/cenkalti/backoff/v5"
)

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
