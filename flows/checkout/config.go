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
	// Timeout bounds how long a checkout call waits for its saga's outcome;
	// an attempt still running then is given up and compensated before
	// the call returns (see Flow.Checkout). It is also the call's budget
	// for a Redis that cannot be reached: a checkout keeps trying within
	// its wait, then for RetryFor more to give its attempt up, before it
	// fails as unavailable (503 with Retry-After). Default 30s.
	Timeout time.Duration
	// RetryFor is how long a store call (every contract route but the
	// checkout: create, find, add, subtract, pay, add item) keeps trying
	// while Redis cannot be reached — refused, reset or timed-out
	// connections, a server loading its append-only file, a replica during
	// a failover — before it fails as unavailable (503 with Retry-After).
	// Every write it retries is idempotent: ids are chosen before the first
	// try, and a change of an amount or an order's items records its
	// outcome under a key of the call's own, so a try whose reply was lost
	// is not applied twice. Default 5s: a Redis restart with its AOF
	// replayed goes unnoticed by callers.
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
	// Wait is how many replicas must hold the writes a call is answered
	// on (a checkout's outcome, a payment, a stock change, a create)
	// before it answers, and how long to wait for them (see
	// stream.ReplicaWait); a call they do not confirm in time fails as
	// unavailable (503 with Retry-After), its outcome unknown to the
	// caller. Default off: replication is asynchronous, and a failover to
	// a replica that lagged may lose the last answered changes.
	Wait stream.ReplicaWait
	// Stage tunes the runners of the flow's stages. For the saga's stages
	// its zero timing fields are derived from Timeout (SagaStage: ClaimIdle
	// Timeout/3, so 10s by default); the others take the runtime's
	// defaults. Validate refuses timings under which a crashed copy's saga
	// step could not be taken over before the waiting call gives up.
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

// SagaStage is the runner configuration of the saga's stages (stock,
// payment, order): Stage with its zero timing fields derived from Timeout
// (stream.RunnerConfig.ForDeadline). The history stage keeps Stage as it
// is: it batches for ClickHouse, and no call waits on it.
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
