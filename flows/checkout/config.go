package checkout

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/dropstream/dropstream/internal/bounds"
	"github.com/dropstream/dropstream/stream"
)

// Config configures the flow; zero fields take defaults (WithDefaults).
type Config struct {
	// Partitions of every topic and key, fixed per deployment. Default 8.
	Partitions int
	// Timeout bounds a checkout's wait, then gives the attempt up. Default 30s.
	Timeout time.Duration
	// RetryFor is how long a store call retries an unreachable Redis
	// before failing with 503. Default 5s.
	RetryFor time.Duration
	// Recheck is how often a waiting checkout rereads its status. Default 1s.
	Recheck time.Duration
	// StateTTL keeps ledger entries and finished sagas. Default 7 days.
	StateTTL time.Duration
	// SweepInterval is how often Flow.RunSweeper sweeps. Default 10s.
	SweepInterval time.Duration
	// SweepAge is the age at which the sweeper resends commands. Default 30s.
	SweepAge time.Duration
	// AbandonAge, above SweepAge, is when silent parts are abandoned. Default 5m.
	AbandonAge time.Duration
	// ConservationInterval is how often the sweeper runs
	// Flow.CheckConservation. Default 1m.
	ConservationInterval time.Duration
	// Wait makes calls answer once replicas hold their writes, else fail
	// as unavailable. Default off: a failover may lose the last changes.
	Wait stream.ReplicaWait
	// Stage tunes the stage runners (see SagaStage).
	Stage stream.RunnerConfig
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	c.Partitions = cmp.Or(c.Partitions, 8)
	c.Timeout = cmp.Or(c.Timeout, 30*time.Second)
	c.RetryFor = cmp.Or(c.RetryFor, 5*time.Second)
	c.Recheck = cmp.Or(c.Recheck, time.Second)
	c.SweepInterval = cmp.Or(c.SweepInterval, 10*time.Second)
	c.SweepAge = cmp.Or(c.SweepAge, 30*time.Second)
	c.AbandonAge = cmp.Or(c.AbandonAge, 5*time.Minute)
	c.ConservationInterval = cmp.Or(c.ConservationInterval, time.Minute)
	c.StateTTL = cmp.Or(c.StateTTL, 7*24*time.Hour)
	return c
}

// SagaStage is Stage with zero timings derived from Timeout, for the saga
// stages.
func (c Config) SagaStage() stream.RunnerConfig { return c.Stage.ForDeadline(c.Timeout) }

// Validate reports every invalid field of a defaulted config.
func (c Config) Validate() error {
	var errs []error
	errs = bounds.Check(errs, "checkout: partitions", c.Partitions, 1, stream.MaxPartitions)
	errs = bounds.CheckText(errs, "checkout: timeout", c.Timeout, time.Millisecond, 10*time.Minute, "1ms..10m")
	errs = bounds.CheckText(errs, "checkout: retry for", c.RetryFor, time.Millisecond, 10*time.Minute, "1ms..10m")
	errs = bounds.AtLeast(errs, "checkout: recheck", c.Recheck, time.Millisecond)
	errs = bounds.AtLeast(errs, "checkout: sweep interval", c.SweepInterval, time.Millisecond)
	errs = bounds.AtLeast(errs, "checkout: sweep age", c.SweepAge, time.Millisecond)
	errs = bounds.AtLeast(errs, "checkout: conservation interval", c.ConservationInterval, time.Second)
	if c.AbandonAge <= c.SweepAge || c.AbandonAge >= c.StateTTL {
		errs = append(errs, fmt.Errorf("checkout: abandon age %s must exceed sweep age %s and stay below state ttl %s", c.AbandonAge, c.SweepAge, c.StateTTL))
	}
	errs = bounds.AtLeast(errs, "checkout: state ttl", c.StateTTL, time.Minute)
	if err := c.Wait.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("checkout: %w", err))
	}
	if err := c.SagaStage().CheckDeadline("checkout timeout", c.Timeout); err != nil {
		errs = append(errs, fmt.Errorf("checkout: stages: %w", err))
	}
	return errors.Join(errs...)
}
