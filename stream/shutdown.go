package stream

import (
	"context"
	"time"
)

// Shutdown. When a runner's context ends, each partition finishes its batch
// within HandlerTimeout; then the handlers' context ends and no further
// message starts, nor any retry pause. Unsettled messages stay pending.

// stopKey carries the runner's stop signal in handler contexts.
type stopKey struct{}

// drainContext returns the context handlers run under: it outlives stop by
// drain, and carries stop's Done channel for stopping to see.
func drainContext(stop context.Context, drain time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.WithValue(context.WithoutCancel(stop), stopKey{}, stop.Done()))
	unhook := context.AfterFunc(stop, func() {
		t := time.NewTimer(drain)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-ctx.Done(): // released before the drain ended
		}
	})
	return ctx, func() {
		unhook()
		cancel()
	}
}

// stopping returns the channel closed when the runner handling ctx's
// message was asked to stop (nil, never closed, outside a runner).
func stopping(ctx context.Context) <-chan struct{} {
	ch, _ := ctx.Value(stopKey{}).(<-chan struct{})
	return ch
}

// stopped reports whether the runner handling ctx's message was asked to
// stop.
func stopped(ctx context.Context) bool {
	select {
	case <-stopping(ctx):
		return true
	default:
		return false
	}
}

// pause waits d, or less when ctx ends or its runner is asked to stop; it
// reports whether the whole pause passed. A pause never starts after stop.
func pauseFor(ctx context.Context, d time.Duration) bool {
	if stopped(ctx) || ctx.Err() != nil {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-stopping(ctx):
		return false
	case <-t.C:
		return true
	}
}
