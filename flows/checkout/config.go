package checkout

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/dropstream/dropstream/stream"
)

// Config configures the flow. Zero fields take their documented defaults
// (WithDefaults); Validate checks the result.
type Config struct {
	// Partitions is the partition count of every topic and key of the flow,
	// fixed for a deployment. Default 8.
	Partitions int
	// Timeout bounds a checkout call's wait for its outcome; an attempt
	// still running then is given up (see Flow.Checkout). A call also
	// retries an unreachable Redis within it, plus RetryFor. Default 30s.
	Timeout time.Duration
	// RetryFor is how long a store call retries while Redis cannot be
	// reached before it fails as unavailable (503). Its writes are
	// idempotent: ids are chosen before the first try and amount changes are
	// recorded under a call key. Default 5s, enough for a Redis restart.
	RetryFor time.Duration
	// Recheck is how often a waiting checkout reads its saga's status in
	// case a notification was lost (a Pub/Sub reconnect). Default 1s.
	Recheck time.Duration
	// StateTTL is how long ledger entries and finished sagas are kept. It
	// must outlive every redelivery of a command. Default 7 days.
	StateTTL time.Duration
	// SweepInterval is how often Flow.RunSweeper sweeps attempts left
	// open (see Flow.Sweep). Default 10s.
	SweepInterval time.Duration
	// SweepAge is how long an attempt stays open before the sweeper sends
	// its missing commands again. Default 30s.
	SweepAge time.Duration
	// AbandonAge is how long a pending attempt waits for its parts before
	// the sweeper gives up the silent ones and compensates the attempt.
	// Default 5m; it must exceed SweepAge.
	AbandonAge time.Duration
	// ConservationInterval is how often Flow.RunSweeper checks that stock
	// and credit are conserved (Flow.CheckConservation), reading every
	// item and user. Default 1m.
	ConservationInterval time.Duration
	// Wait is how many replicas must hold a call's writes before it
	// answers, and for how long (stream.ReplicaWait); an unconfirmed call
	// fails as unavailable. Default off: a failover may lose the last
	// answered changes.
	Wait stream.ReplicaWait
	// Stage tunes the flow's stage runners. The saga stages derive zero
	// timing fields from Timeout (see SagaStage); Validate refuses timings
	// that would not let a crashed copy's step be taken over in time.
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
	if c.StateTTL == 0 {
		c.StateTTL = 7 * 24 * time.Hour
	}
	return c
}

// SagaStage is Stage with its zero timing fields derived from Timeout
// (stream.RunnerConfig.ForDeadline), for the stock, payment and order
// stages. The history stage uses Stage as it is.
func (c Config) SagaStage() stream.RunnerConfig { return c.Stage.ForDeadline(c.Timeout) }

// Validate reports every invalid field of a defaulted config.
func (c Config) Validate() error {
	var errs []error
	if c.Partitions < 1 || c.Partitions > stream.MaxPartitions {
		errs = append(errs, fmt.Errorf("checkout: partitions %d out of range 1..%d", c.Partitions, stream.MaxPartitions))
	}
	if c.Timeout < time.Millisecond || c.Timeout > 10*time.Minute {
		errs = append(errs, fmt.Errorf("checkout: timeout %s out of range 1ms..10m", c.Timeout))
	}
	if c.RetryFor < time.Millisecond || c.RetryFor > 10*time.Minute {
		errs = append(errs, fmt.Errorf("checkout: retry for %s out of range 1ms..10m", c.RetryFor))
	}
	if c.Recheck < time.Millisecond {
		errs = append(errs, fmt.Errorf("checkout: recheck %s below 1ms", c.Recheck))
	}
	if c.SweepInterval < time.Millisecond || c.SweepAge < time.Millisecond {
		errs = append(errs, fmt.Errorf("checkout: sweep interval %s and sweep age %s must be at least 1ms", c.SweepInterval, c.SweepAge))
	}
	if c.ConservationInterval < time.Second {
		errs = append(errs, fmt.Errorf("checkout: conservation interval %s below 1s", c.ConservationInterval))
	}
	if c.AbandonAge <= c.SweepAge || c.AbandonAge >= c.StateTTL {
		errs = append(errs, fmt.Errorf("checkout: abandon age %s must exceed sweep age %s and stay below state ttl %s", c.AbandonAge, c.SweepAge, c.StateTTL))
	}
	if c.StateTTL < time.Minute {
		errs = append(errs, fmt.Errorf("checkout: state ttl %s below 1m", c.StateTTL))
	}
	if err := c.Wait.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("checkout: %w", err))
	}
	if err := c.SagaStage().CheckDeadline("checkout timeout", c.Timeout); err != nil {
		errs = append(errs, fmt.Errorf("checkout: stages: %w", err))
	}
	return errors.Join(errs...)
}
