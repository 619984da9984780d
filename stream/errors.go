package stream

import (
	"errors"
	"fmt"
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
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// Outcome is how the runtime settles a handled message.
type Outcome string

// Outcomes, used as the "outcome" attribute of stage metrics.
const (
	OutcomeAcked        Outcome = "acked"
	OutcomeDropped      Outcome = "dropped"
	OutcomeDeadLettered Outcome = "dead_lettered"
	OutcomeFailed       Outcome = "failed"
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
	default:
		return OutcomeFailed
	}
}
