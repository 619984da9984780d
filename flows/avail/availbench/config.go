// Package availbench measures the availability pipeline on a real Redis
// and ClickHouse: diff throughput, ClickHouse inserts, end-to-end latency
// and Redis memory per entity. It needs an empty Redis database and
// creates its own ClickHouse database, dsbench_<hex>.
package availbench

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/dropstream/dropstream/internal/benchstat"
	"github.com/dropstream/dropstream/internal/bounds"
	"github.com/dropstream/dropstream/internal/progress"

	"github.com/dropstream/dropstream/stream"
)

// Defaults of Config.
const (
	DefaultScopes          = 10_000
	DefaultPerScope        = 100
	DefaultChurn           = 0.01
	DefaultRuns            = 5
	DefaultPartitions      = 8
	DefaultRate            = 10_000
	DefaultLatencyDuration = 15 * time.Second
	// MaxPerScope bounds PerScope: ring entities need distinct keys with
	// party sizes of at most 50.
	MaxPerScope = 3000
)

// Config describes one bench. Zero fields take their defaults.
type Config struct {
	// ClickHouseDSN is the server the bench creates its database on. Required
	// by Run and Analytics.
	ClickHouseDSN string
	// Scopes is the number of scopes (venues, one watcher each). Default 10,000.
	Scopes int
	// PerScope is the entities a scope's run observes. Default 100, ≤ MaxPerScope.
	PerScope int
	// Churn is the share of a scope's entities replaced per run (≥ 1). Default 0.01.
	Churn float64
	// Runs is the number of churn runs of every scope whose diff is
	// measured; their transitions are the analytics backlog. Default 5.
	Runs int
	// Partitions of the availability topics. Default 8.
	Partitions int
	// DiffCopies and AnalyticsCopies are the copies of those stages. Default 1.
	DiffCopies, AnalyticsCopies int
	// DiffBatch is the diff stage's XREADGROUP COUNT; 0: the stage's default.
	DiffBatch int
	// Rate is the latency run's observations per second. Default 10,000.
	Rate int
	// LatencyDuration is how long the latency run publishes. Default 15s.
	LatencyDuration time.Duration
	// Keep leaves the Redis keys and the ClickHouse database in place.
	Keep bool
	// Telemetry instruments the stages and publishers.
	Telemetry stream.Telemetry
	// Progress, when set, receives a line at each step.
	Progress func(line string)
	// Phases shows the long waits (a bar, or start/end lines when piped); nil: none.
	Phases *progress.Printer
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	c.Scopes = cmp.Or(c.Scopes, DefaultScopes)
	c.PerScope = cmp.Or(c.PerScope, DefaultPerScope)
	c.Churn = cmp.Or(c.Churn, DefaultChurn)
	c.Runs = cmp.Or(c.Runs, DefaultRuns)
	c.Partitions = cmp.Or(c.Partitions, DefaultPartitions)
	c.DiffCopies = cmp.Or(c.DiffCopies, 1)
	c.AnalyticsCopies = cmp.Or(c.AnalyticsCopies, 1)
	c.Rate = cmp.Or(c.Rate, DefaultRate)
	c.LatencyDuration = cmp.Or(c.LatencyDuration, DefaultLatencyDuration)
	return c
}

// Validate reports every invalid field of a defaulted config.
func (c Config) Validate() error {
	var errs []error
	errs = bounds.Check(errs, "availbench: scopes", c.Scopes, 1, 1_000_000)
	errs = bounds.Check(errs, "availbench: per scope", c.PerScope, 1, MaxPerScope)
	if c.Churn <= 0 || c.Churn > 1 || math.IsNaN(c.Churn) {
		errs = append(errs, fmt.Errorf("availbench: churn %v out of range (0, 1]", c.Churn))
	}
	errs = bounds.Check(errs, "availbench: runs", c.Runs, 1, 1000)
	errs = bounds.Check(errs, "availbench: partitions", c.Partitions, 1, stream.MaxPartitions)
	if c.DiffCopies < 1 || c.DiffCopies > 64 || c.AnalyticsCopies < 1 || c.AnalyticsCopies > 64 {
		errs = append(errs, fmt.Errorf("availbench: copies %d and %d out of range 1..64", c.DiffCopies, c.AnalyticsCopies))
	}
	errs = bounds.Check(errs, "availbench: diff batch", c.DiffBatch, 0, 10_000)
	if c.Rate < 1 || c.LatencyDuration <= 0 {
		errs = append(errs, fmt.Errorf("availbench: rate %d and latency duration %s must be positive", c.Rate, c.LatencyDuration))
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
	// P50, P99 and Max are quantiles of receive time − transition run_at.
	P50, P99, Max time.Duration
}
