package stream

import (
	"context"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// Pauses between the calls of RetryUnavailable: doubling from the first to
// the longest, each drawn within ±50% — short enough to catch a Redis back
// from a restart within a fraction of a second, long enough not to flood
// one that is loading its data.
const (
	unavailableFirstPause = 50 * time.Millisecond
	unavailableMaxPause   = time.Second
)

// RetryUnavailable calls op, and calls it again after a pause while it
// fails because Redis is unavailable (IsUnavailable: a refused, reset or
// timed-out connection, a server loading its data, a replica during a
// failover) and budget has not passed since the first call. It returns
// op's first other outcome, or its last result and error when the budget
// is spent or ctx ends (ctx's error then). A budget of 0 or less calls op
// once.
//
// A call whose reply was lost may have been applied: only an op that is
// idempotent — every write keyed by a business key or an id fixed before
// the first call — may be retried so.
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
