package stream

import (
	"context"
	"math/rand/v2"
)

// Retry calls the handler again, with doubling pauses and full jitter, while
// it fails retryably, up to cfg.MaxRetries times within one delivery. No
// pause starts once the context ends or the runner stops.
func Retry(cfg RetryConfig) Middleware {
	cfg = cfg.withDefaults()
	return func(next Handler) Handler {
		if cfg.Disabled {
			return next
		}
		return func(ctx context.Context, msg *Message) error {
			err := next(ctx, msg)
			if cfg.MaxRetries == 0 || Classify(err) != OutcomeFailed {
				return err
			}
			bo := NewBackoff(cfg.InitialInterval, cfg.MaxInterval, 0)
			for i := 0; i < cfg.MaxRetries && Classify(err) == OutcomeFailed; i++ {
				wait := bo.NextBackOff()
				if !pauseFor(ctx, wait/2+rand.N(wait/2+1)) {
					return err
				}
				err = next(ctx, msg)
			}
			return err
		}
	}
}
