// Package checkoutbench measures the checkout saga over its HTTP contract,
// served on a loopback port with the stages in this process: batch_init,
// then checkouts/s with fixed clients, latency at a fixed rate, and a
// consistency check of stock, credit and paid flags.
package checkoutbench

import (
	"cmp"
	"errors"
	"fmt"
	"os/exec"
	"time"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/internal/bounds"
	"github.com/dropstream/dropstream/internal/progress"
	"github.com/dropstream/dropstream/stream"
)

// Targets of the checkout flow on the project's machine (BENCHMARKS.md).
const (
	TargetCheckoutsPerSecond = 3000
	TargetP99Millis          = 50
	TargetRate               = 1000
)

// Config configures a run; zero fields take the documented defaults.
type Config struct {
	// Items, Users and Orders are the batch_init sizes. Default 100,000
	// each.
	Items, Users, Orders int
	// Stock and Credit are every item's and user's starting amounts.
	// Default 1,000,000 each, so checkouts do not run short unless told.
	Stock, Credit int64
	// Price is every item's price. Default 1.
	Price int64
	// Clients is the number of concurrent clients of the throughput run.
	// Default 64.
	Clients int
	// Duration is the length of the throughput run. Default 10s.
	Duration time.Duration
	// Rate is the checkouts/s of the latency run. Default 1000.
	Rate int
	// LatencyDuration is the length of the latency run. Default 10s.
	LatencyDuration time.Duration
	// Copies is the number of copies of each stage. Default 1.
	Copies int
	// Partitions of the flow. Default 8.
	Partitions int
	// RateLimit is the API's rate limit: the binary's as configured
	// (flow.BenchEnv.RateLimit), so the bench measures the defaults. Its
	// zero value is the API's defaults.
	RateLimit api.RateLimitConfig
	// Wait is the flow's replica wait (checkout.Config.Wait): the
	// binary's DROPSTREAM_REDIS_WAIT. Default off.
	Wait stream.ReplicaWait
	// Telemetry instruments the stages and the API.
	Telemetry stream.Telemetry
	// Self runs the binary with args (flow.BenchEnv.Self): the clients
	// run apart in its load process. Nil runs them in this process, their
	// CPU then in its figure.
	Self func(args ...string) *exec.Cmd
	// Progress, when set, shows each phase: the batch_init, both runs and
	// the check.
	Progress *progress.Printer
}

// WithDefaults returns c with zero fields set.
func (c Config) WithDefaults() Config {
	for _, f := range []*int{&c.Items, &c.Users, &c.Orders} {
		if *f == 0 {
			*f = 100_000
		}
	}
	c.Stock = cmp.Or(c.Stock, 1_000_000)
	c.Credit = cmp.Or(c.Credit, 1_000_000)
	c.Price = cmp.Or(c.Price, 1)
	c.Clients = cmp.Or(c.Clients, 64)
	c.Duration = cmp.Or(c.Duration, 10*time.Second)
	c.Rate = cmp.Or(c.Rate, TargetRate)
	c.LatencyDuration = cmp.Or(c.LatencyDuration, 10*time.Second)
	c.Copies = cmp.Or(c.Copies, 1)
	c.Partitions = cmp.Or(c.Partitions, 8)
	return c
}

// Validate checks a defaulted config.
func (c Config) Validate() error {
	var errs []error
	for name, v := range map[string]int{"items": c.Items, "users": c.Users, "orders": c.Orders} {
		errs = bounds.Check(errs, "checkoutbench: "+name, v, 1, 1_000_000)
	}
	if c.Clients < 1 || c.Clients > 4096 || c.Rate < 1 || c.Rate > 100_000 || c.Copies < 1 || c.Copies > 64 {
		errs = append(errs, fmt.Errorf("checkoutbench: clients %d (1..4096), rate %d (1..100000) or copies %d (1..64) out of range", c.Clients, c.Rate, c.Copies))
	}
	if c.Duration <= 0 || c.LatencyDuration <= 0 || c.Stock < 0 || c.Credit < 0 || c.Price < 0 {
		errs = append(errs, errors.New("checkoutbench: durations must be positive, amounts not negative"))
	}
	return errors.Join(errs...)
}
