package checkout

import (
	"errors"
	"fmt"
	"time"

	"github.com/dropstream/dropstream/internal/bounds"
	"github.com/dropstream/dropstream/internal/settings"
	"github.com/dropstream/dropstream/stream"
)

// Config configures the flow; zero fields take defaults (WithDefaults).
type Config struct {
	// Partitions of every topic and key, fixed per deployment. Default 8.
	Partitions int `default:"8"`
	// Timeout bounds a checkout's wait, then gives the attempt up. Default 30s.
	Timeout time.Duration `default:"30s" range:"1ms..10m"`
	// RetryFor is how long a store call retries an unreachable Redis (then 503).
	RetryFor time.Duration `default:"5s" range:"1ms..10m"`
	// Recheck is how often a waiting checkout rereads its status. Default 1s.
	Recheck time.Duration `default:"1s" range:"1ms.."`
	// StateTTL keeps ledger entries and finished sagas. Default 7 days.
	StateTTL time.Duration `default:"168h" range:"1m.."`
	// SweepInterval is how often Flow.RunSweeper sweeps. Default 10s.
	SweepInterval time.Duration `default:"10s" range:"1ms.."`
	// SweepAge is the age at which the sweeper resends commands. Default 30s.
	SweepAge time.Duration `default:"30s" range:"1ms.."`
	// AbandonAge, above SweepAge, is when silent parts are abandoned. Default 5m.
	AbandonAge time.Duration `default:"5m"`
	// ConservationInterval is how often the sweeper checks conservation.
	ConservationInterval time.Duration `default:"1m" range:"1s.."`
	// Wait makes calls answer once replicas hold their writes, else fail
	// as unavailable. Default off: a failover may lose the last changes.
	Wait stream.ReplicaWait
	// Stage tunes the stage runners (see SagaStage).
	Stage stream.RunnerConfig
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	settings.Defaults(&c)
	return c
}

// SagaStage is Stage with zero timings derived from Timeout, for the saga
// stages.
func (c Config) SagaStage() stream.RunnerConfig { return c.Stage.ForDeadline(c.Timeout) }

// Validate reports every invalid field of a defaulted config.
func (c Config) Validate() error {
	errs := bounds.Check([]error{settings.Check("checkout", &c)}, "checkout: partitions", c.Partitions, 1, stream.MaxPartitions)
	errs = bounds.Require(errs, c.AbandonAge > c.SweepAge && c.AbandonAge < c.StateTTL,
		"checkout: abandon age %s must exceed sweep age %s and stay below state ttl %s", c.AbandonAge, c.SweepAge, c.StateTTL)
	if err := c.Wait.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("checkout: %w", err))
	}
	if err := c.SagaStage().CheckDeadline("checkout timeout", c.Timeout); err != nil {
		errs = append(errs, fmt.Errorf("checkout: stages: %w", err))
	}
	return errors.Join(errs...)
}
