package stream

import (
	"context"
	"fmt"
)

// ErrMaxDeliveries is the reason given to a message that arrives after its
// last allowed delivery (for example one whose handling crashed the process
// every time).
var ErrMaxDeliveries = fmt.Errorf("max deliveries exceeded")

// retrying reports whether err leaves its message to be delivered again:
// a retryable failure, now or after a delay.
func retrying(err error) bool {
	o := Classify(err)
	return o == OutcomeFailed || o == OutcomeDelayed
}

// GiveUp makes a failure at delivery maxDeliveries Permanent, and
// dead-letters a message delivered more often unhandled (ErrMaxDeliveries).
func GiveUp(maxDeliveries int) Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, msg *Message) error {
			if msg.Attempt > maxDeliveries {
				return Permanent(fmt.Errorf("%w: delivery %d of %d", ErrMaxDeliveries, msg.Attempt, maxDeliveries))
			}
			err := next(ctx, msg)
			if retrying(err) && msg.Attempt >= maxDeliveries {
				return Permanent(fmt.Errorf("gave up after %d deliveries: %w", msg.Attempt, err))
			}
			return err
		}
	}
}
