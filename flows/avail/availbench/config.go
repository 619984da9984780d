// Package availbench measures the availability pipeline on a real Redis
// and ClickHouse: diff throughput, ClickHouse inserts, end-to-end latency
// and Redis memory per entity. It needs an empty Redis database and
// creates its own ClickHouse database, dsbench_<hex>.
package availbench

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/dropstream/dropstream/internal/benchstat"
	"github.com/dropstream/dropstream/internal/bounds"
	"github.com/dropstream/dropstream/internal/progress"
	"github.com/dropstream/dropstream/internal/settings"

	"github.com/dropstream/dropstream/stream"
)

// MaxPerScope bounds PerScope: ring entities need distinct keys with party
// sizes of at most 50.
const MaxPerScope = 3000

// Config describes one bench. Zero fields take their defaults.
type Config struct {
	// ClickHouseDSN is the server the bench creates its database on. Required
	// by Run and Analytics.
	ClickHouseDSN string
	// Scopes is the number of scopes (venues, one watcher each). Default 10,000.
	Scopes int `flag:"scopes" default:"10000" range:"1..1000000" help:"scopes (venues), one webhook watcher each"`
	// PerScope is the entities a scope's run observes. Default 100, ≤ MaxPerScope.
	PerScope int `flag:"per-scope" default:"100" help:"entities observed per run of a scope"`
	// Churn is the share of a scope's entities replaced per run (≥ 1). Default 0.01.
	Churn float64 `flag:"churn" default:"0.01" help:"fraction of a scope's entities replaced per run"`
	// Runs is the number of churn runs of every scope whose diff is
	// measured; their transitions are the analytics backlog. Default 5.
	Runs int `flag:"runs" default:"5" range:"1..1000" help:"measured churn runs of every scope"`
	// Partitions of the availability topics. Default 8.
	Partitions int `default:"8"`
	// DiffCopies and AnalyticsCopies are the copies of those stages. Default 1.
	DiffCopies      int `flag:"diff-copies" default:"1" range:"1..64" help:"copies of the diff stage"`
	AnalyticsCopies int `flag:"analytics-copies" default:"1" range:"1..64" help:"copies of each analytics stage"`
	// DiffBatch is the diff stage's XREADGROUP COUNT; 0: the stage's default.
	DiffBatch int `flag:"diff-batch" range:"0..10000" help:"XREADGROUP COUNT of the diff stage (0: the stage's default)"`
	// Rate is the latency run's observations per second. Default 10,000.
	Rate int `flag:"rate" default:"10000" range:"1.." help:"observations/s of the latency run"`
	// LatencyDuration is how long the latency run publishes. Default 15s.
	LatencyDuration time.Duration `flag:"latency-duration" default:"15s" range:"1ns.." help:"length of the latency run"`
	// Keep leaves the Redis keys and the ClickHouse database in place.
	Keep bool `flag:"keep" help:"keep the Redis keys and the ClickHouse database"`
	// Telemetry instruments the stages and publishers.
	Telemetry stream.Telemetry
	// Phases, when set, receives a line at each step and shows the long
	// waits (a bar, or start/end lines when piped).
	Phases *progress.Printer
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	settings.Defaults(&c)
	return c
}

// Validate reports every invalid field of a defaulted config.
func (c Config) Validate() error {
	errs := []error{settings.Check("availbench", &c)}
	errs = bounds.Check(errs, "availbench: per scope", c.PerScope, 1, MaxPerScope)
	errs = bounds.Check(errs, "availbench: partitions", c.Partitions, 1, stream.MaxPartitions)
	if !(c.Churn > 0 && c.Churn <= 1) {
		errs = append(errs, fmt.Errorf("availbench: churn %v out of range (0, 1]", c.Churn))
	}
	return errors.Join(errs...)
}

// churned is the number of entities a scope's run replaces.
func (c Config) churned() int {
	return min(c.PerScope, max(1, int(math.Round(c.Churn*float64(c.PerScope)))))
}

// Rate is a count over a duration, with the CPU the bench process and
// Redis (0 on a cluster) used in all.
type Rate struct {
	Count   int64
	Elapsed time.Duration
	CPU     benchstat.CPU
}

// PerSecond is Count / Elapsed in seconds (0 for no time).
func (r Rate) PerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Count) / r.Elapsed.Seconds()
}

// Memory is Redis's used_memory (INFO memory) growth over the entities.
type Memory struct {
	// Bytes is used_memory's growth since the start, output streams trimmed.
	Bytes int64
	// Entities is the number of entities the state holds.
	Entities int
}

// PerEntity is Bytes / Entities.
func (m Memory) PerEntity() float64 {
	if m.Entities == 0 {
		return 0
	}
	return float64(m.Bytes) / float64(m.Entities)
}

// Latency summarizes the end-to-end latencies of the latency run.
type Latency struct {
	// Rate is the observation rate and Elapsed how long it was published.
	Rate    int
	Elapsed time.Duration
	// Expected notifications must be delivered; Received distinct ones came,
	// Duplicates came again.
	Expected, Received, Duplicates int
	// Latencies are of receive time − transition run_at.
	benchstat.Latencies
}
