package collector

import "time"

// Clock is the collector's source of time: run timestamps, schedules, rate
// limits and backoff all read it. Tests inject a fake one to control time.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// Alarm returns a channel that receives once the clock reaches t, at
	// once when t is not after Now.
	Alarm(t time.Time) <-chan time.Time
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// Alarm returns time.After(time.Until(t)).
func (SystemClock) Alarm(t time.Time) <-chan time.Time { return time.After(time.Until(t)) }
