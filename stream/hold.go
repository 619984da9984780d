package stream

import (
	"errors"
	"time"
)

// holdError asks the batch runner to keep a batch in hand.
type holdError struct{ err error }

func (e *holdError) Error() string { return "held: " + e.err.Error() }
func (e *holdError) Unwrap() error { return e.err }

// Hold marks err, returned by a BatchHandler for messages whose effect
// cannot be made for now because its sink (a database) does not answer,
// as a reason to keep them in hand rather than leave them pending: the
// runner calls the handler again with those messages after a pause
// (growing from 50ms to ErrorBackoff), each call with a fresh
// HandlerTimeout, and keeps them fresh meanwhile, until they settle
// otherwise or the runner stops (then they stay pending, even on their
// last allowed delivery: a stop is not a failure). While held, a message keeps its delivery count, the
// partition reads nothing new (the backlog waits in the stream), and no
// per-message failure is logged; once the sink answers the held batch is
// written at once, not ClaimIdle later. For a Handler (one message at a
// time) a held error is a plain retryable error. Hold(nil) is nil.
func Hold(err error) error {
	if err == nil || IsHold(err) {
		return err
	}
	return &holdError{err: err}
}

// IsHold reports whether err, or an error it wraps, was marked Hold.
func IsHold(err error) bool {
	var h *holdError
	return errors.As(err, &h)
}

// minHoldPause is the first pause between two calls of a held batch.
const minHoldPause = 50 * time.Millisecond
