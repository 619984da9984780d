package stream

import (
	"context"
	"time"
)

// Timeout bounds each handler call with a context deadline of d. Handlers
// must honour their context for the bound to hold.
func Timeout(d time.Duration) Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, msg *Message) error {
			ctx, cancel := context.WithTimeout(ctx, d)
			defer cancel()
			return next(ctx, msg)
		}
	}
}
