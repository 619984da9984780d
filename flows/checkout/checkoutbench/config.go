// Package checkoutbench measures the checkout saga over its HTTP contract,
// served on a loopback port with the stages in this process: batch_init,
// then checkouts/s with fixed clients, latency at a fixed rate, and a
// consistency check of stock, credit and paid flags.
package checkoutbench

import (
	"os/exec"
	"time"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/internal/progress"
	"github.com/dropstream/dropstream/stream"
)

// Targets of the checkout flow on the project's machine (BENCHMARKS.md).
const (
	TargetCheckoutsPerSecond = 3000
	TargetP99Millis          = 50
)

// Config configures a run; zero fields take the documented defaults.
type Config struct {
	// Items, Users and Orders are the batch_init sizes. Default 100,000
	// each.
	Items  int `flag:"items" default:"100000" range:"1..1000000" help:"items of the batch_init"`
	Users  int `flag:"users" default:"100000" range:"1..1000000" help:"users of the batch_init"`
	Orders int `flag:"orders" default:"100000" range:"1..1000000" help:"orders of the batch_init (two random items each)"`
	// Stock and Credit are every item's and user's starting amounts.
	// Default 1,000,000 each, so checkouts do not run short unless told.
	Stock  int64 `flag:"stock" default:"1000000" range:"0.." help:"starting stock of every item"`
	Credit int64 `flag:"credit" default:"1000000" range:"0.." help:"starting credit of every user"`
	// Price is every item's price. Default 1.
	Price int64 `default:"1" range:"0.."`
	// Clients is the number of concurrent clients of the throughput run.
	// Default 64.
	Clients int `flag:"clients" default:"64" range:"1..4096" help:"concurrent clients of the throughput run"`
	// Duration is the length of the throughput run. Default 10s.
	Duration time.Duration `flag:"duration" default:"10s" range:"1ns.." help:"length of the throughput run"`
	// Rate is the checkouts/s of the latency run. Default 1000.
	Rate int `flag:"rate" default:"1000" range:"1..100000" help:"checkouts/s of the latency run"`
	// LatencyDuration is the length of the latency run. Default 10s.
	LatencyDuration time.Duration `flag:"latency-duration" default:"10s" range:"1ns.." help:"length of the latency run"`
	// Copies is the number of copies of each stage. Default 1.
	Copies int `flag:"copies" default:"1" range:"1..64" help:"copies of each stage"`
	// Partitions of the flow. Default 8.
	Partitions int `default:"8"`
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
	// run apart in its load process. Required.
	Self func(args ...string) *exec.Cmd
	// Progress, when set, shows each phase: the batch_init, both runs and
	// the check.
	Progress *progress.Printer
}
