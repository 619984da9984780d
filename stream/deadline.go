package stream

import (
	"cmp"
	"errors"
	"fmt"
	"time"
)

// ErrDeadlineConflict is wrapped by CheckDeadline when a stage's copies
// could not take over a crashed copy's work before the flow waiting on it
// gives up.
var ErrDeadlineConflict = errors.New("stage timing conflicts with the flow's deadline")

// ForDeadline returns c with its zero timing fields derived from deadline,
// the longest a caller waits for this stage's work, so a crashed copy's work
// is taken over well within it: ClaimIdle deadline/3, ClaimInterval
// min(5s, deadline/10), HandlerTimeout min(5s, ClaimIdle/4),
// Retry.MaxInterval min(1s, ClaimIdle/16), Retry.InitialInterval
// min(50ms, Retry.MaxInterval/2). Set fields are kept (see CheckDeadline).
func (c RunnerConfig) ForDeadline(deadline time.Duration) RunnerConfig {
	if deadline <= 0 {
		return c
	}
	c.ClaimIdle = cmp.Or(c.ClaimIdle, deadline/3)
	c.ClaimInterval = cmp.Or(c.ClaimInterval, min(5*time.Second, deadline/10))
	c.HandlerTimeout = cmp.Or(c.HandlerTimeout, min(5*time.Second, c.ClaimIdle/4))
	c.Retry.MaxInterval = cmp.Or(c.Retry.MaxInterval, min(time.Second, c.ClaimIdle/16))
	c.Retry.InitialInterval = cmp.Or(c.Retry.InitialInterval, min(50*time.Millisecond, c.Retry.MaxInterval/2))
	return c
}

// CheckDeadline reports whether a crashed copy's work can be taken over in
// time for a caller giving up after deadline (named by what): ClaimIdle +
// ClaimInterval must not exceed half of deadline, leaving the other half to
// the redelivered work. Errors wrap ErrDeadlineConflict.
func (c RunnerConfig) CheckDeadline(what string, deadline time.Duration) error {
	d := c.WithDefaults("check")
	if takeover := d.ClaimIdle + d.ClaimInterval; takeover > deadline/2 {
		return fmt.Errorf("%w: claim idle %s + claim interval %s = %s exceed half of the %s %s: a crashed copy's work would be taken over too late",
			ErrDeadlineConflict, d.ClaimIdle, d.ClaimInterval, takeover, what, deadline)
	}
	return nil
}
