package stream

import (
	"errors"
	"fmt"
	"time"
)

// ErrDrop, wrapped in a handler's error, acknowledges the message without
// retrying or dead-lettering it: the message is deliberately skipped.
var ErrDrop = errors.New("stream: message dropped")

// permanentError marks an error that no retry can fix.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return "permanent: " + e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as permanent: the message is not retried but moved to
// the dead-letter stream at once, with err as its reason. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil || IsPermanent(err) {
		return err
	}
	return &permanentError{err: err}
}

// Permanentf is Permanent(fmt.Errorf(format, args...)).
func Permanentf(format string, args ...any) error {
	return Permanent(fmt.Errorf(format, args...))
}

// IsPermanent reports whether err, or an error it wraps, was marked Permanent.
func IsPermanent(err error) bool { return errors.As(err, new(*permanentError)) }

// MaxRetryDelay bounds the delay of RetryAfter.
const MaxRetryDelay = 24 * time.Hour

// delayError asks for a retry after a delay.
type delayError struct {
	err   error
	delay time.Duration
}

func (e *delayError) Error() string {
	return fmt.Sprintf("retry after %s: %s", e.delay, e.err.Error())
}
func (e *delayError) Unwrap() error { return e.err }

// RetryAfter marks err as retryable after delay (clamped to 0..MaxRetryDelay):
// the runner acknowledges the message and parks it, then puts it back on the
// stream once due, while the partition flows on. It keeps its delivery count
// (MaxDeliveries still applies). RetryAfter(nil, d) is nil; a Permanent or
// ErrDrop error stays what it is.
func RetryAfter(err error, delay time.Duration) error {
	if err == nil {
		return nil
	}
	return &delayError{err: err, delay: min(max(delay, 0), MaxRetryDelay)}
}

// RetryDelay returns the delay err asks for with RetryAfter, if any.
func RetryDelay(err error) (time.Duration, bool) {
	var d *delayError
	if !errors.As(err, &d) {
		return 0, false
	}
	return d.delay, true
}

// Outcome is how the runtime settles a handled message.
type Outcome string

// Outcomes, used as the "outcome" attribute of stage metrics.
const (
	OutcomeAcked        Outcome = "acked"
	OutcomeDropped      Outcome = "dropped"
	OutcomeDeadLettered Outcome = "dead_lettered"
	OutcomeFailed       Outcome = "failed"
	// OutcomeDelayed is a message parked for a retry after a delay
	// (RetryAfter).
	OutcomeDelayed Outcome = "delayed"
)

// Classify maps a handler's error to the outcome the runtime gives it.
func Classify(err error) Outcome {
	switch {
	case err == nil:
		return OutcomeAcked
	case errors.Is(err, ErrDrop):
		return OutcomeDropped
	case IsPermanent(err):
		return OutcomeDeadLettered
	case errors.As(err, new(*delayError)):
		return OutcomeDelayed
	default:
		return OutcomeFailed
	}
}

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
func IsHold(err error) bool { return errors.As(err, new(*holdError)) }

// minHoldPause is the first pause between two calls of a held batch.
const minHoldPause = 50 * time.Millisecond
