// Package tick runs work on a fixed period until a context ends, and waits
// out a delay unless a context ends first.
package tick

import (
	"context"
	"time"
)

// Every calls f at once and then every period until ctx ends. A call that
// overruns the period is followed at once by the next.
func Every(ctx context.Context, period time.Duration, f func()) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		f()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// EveryAfter calls f every period until ctx ends, the first time one
// period from now.
func EveryAfter(ctx context.Context, period time.Duration, f func()) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}

// Sleep waits d, or less when ctx ends first, and then returns that
// error of ctx (nil after the whole wait). A d of zero or less returns
// ctx's error at once.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
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

// Or returns the clock now, or time.Now when now is nil: a config's
// default clock.
func Or(now func() time.Time) func() time.Time {
	if now == nil {
		return time.Now
	}
	return now
}
