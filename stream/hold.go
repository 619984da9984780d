package stream

import (
	"errors"
	"time"
)

// holdError asks the batch runner to keep a batch in hand.
type holdError struct{ err error }

func (e *holdError) Error() string { return "held: " + e.err.Error() }
func (e *holdError) Unwrap() error { return e.err }

// Hold marks err, from a BatchHandler whose sink does not answer, as a reason
// to keep the messages in hand: the runner calls the handler again after a
// pause (50ms growing to ErrorBackoff), their delivery count unchanged, until
// they settle otherwise or the runner stops (they then stay pending); the
// partition reads nothing new meanwhile. For a Handler it is a plain
// retryable error. Hold(nil) is nil.
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
