package watch

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/dropstream/dropstream/internal/settings"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/history"
	"github.com/dropstream/dropstream/notifier/throttle"
	"github.com/dropstream/dropstream/stream"
)

// DefaultHandlerTimeout is the stage's handler timeout: one message may
// fan out to many watchers.
const DefaultHandlerTimeout = 30 * time.Second

// Config configures the "avail-notifier" stage. Zero fields take their defaults.
type Config struct {
	// Ledger configures the delivery ledger (TTL of delivery records, send
	// lease). Its Lease must stay below Runner.ClaimIdle.
	Ledger notifier.DeliveryLedgerConfig
	// WindowTTL is how long an entity's raw flips are kept after the last
	// one. Default 35 days, the diff's state TTL.
	WindowTTL time.Duration `default:"840h" range:"1m.."`
	// MaxWindowFlips is how many raw flips are remembered per entity.
	// Default 16, range 2..1000.
	MaxWindowFlips int `default:"16" range:"2..1000"`
	// MaxPayloadBytes bounds a transition message; larger ones are
	// dead-lettered. Default 64 KiB.
	MaxPayloadBytes int `default:"64KiB" range:"1KiB..8MiB"`
	// Concurrency bounds the sends in flight for one message. Default 8,
	// range 1..256.
	Concurrency int `default:"8" range:"1..256"`
	// History, when set, records every watcher delivery with its ledger
	// record, for GET /v1/notifications. Default none.
	History *history.Recorder
	// Throttle, when set, paces sends per destination and channel and honours
	// a 429's Retry-After. Default none.
	Throttle *throttle.Throttle
	// Sources, when set, looks up sources, so that a source's health changes
	// are told to the watchers it serves. Default none.
	Sources SourceLookup
	// Runner tunes the stage's runner; zero HandlerTimeout and ClaimIdle take
	// DefaultHandlerTimeout and notifier.DefaultClaimIdle.
	Runner stream.RunnerConfig
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	settings.Defaults(&c)
	c.Ledger = c.Ledger.WithDefaults()
	c.Runner.HandlerTimeout = cmp.Or(c.Runner.HandlerTimeout, DefaultHandlerTimeout)
	c.Runner.ClaimIdle = cmp.Or(c.Runner.ClaimIdle, notifier.DefaultClaimIdle)
	return c
}

// Validate reports every invalid field of a defaulted config.
func (c Config) Validate() error {
	errs := []error{c.Ledger.Validate(), settings.Check("notifier", &c)}
	runner := c.Runner.WithDefaults(StageNotifier)
	if err := runner.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("notifier: runner: %w", err))
	}
	if c.Ledger.Lease >= runner.ClaimIdle {
		errs = append(errs, fmt.Errorf("notifier: send lease %s must stay below claim idle %s, or a message redelivered after a crash finds its lease still held",
			c.Ledger.Lease, runner.ClaimIdle))
	}
	return errors.Join(errs...)
}
