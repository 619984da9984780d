package stream

import (
	"context"
	"math/rand/v2"
	"time"
)

// Retry calls the handler again, with doubling pauses and full jitter, while
// it fails with a retryable error (not Permanent, not ErrDrop), up to
// cfg.MaxRetries times within one delivery. When the context ends the last
// error is returned.
func Retry(cfg RetryConfig) Middleware {
	cfg = cfg.withDefaults()
	return func(next Handler) Handler {
		if cfg.Disabled {
			return next
		}
		return func(ctx context.Context, msg *Message) error {
			err := next(ctx, msg)
			pause := cfg.InitialInterval
			for i := 0; i < cfg.MaxRetries && Classify(err) == OutcomeFailed; i++ {
				t := time.NewTimer(pause/2 + rand.N(pause/2+1))
				select {
				case <-ctx.Done():
					t.Stop()
					return err
				case <-t.C:
				}
				err = next(ctx, msg)
				pause = min(2*pause, cfg.MaxInterval)
			}
			return err
		}
	}
}
