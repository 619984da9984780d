package writer

import (
	"errors"
	"fmt"
	"time"

	"github.com/dropstream/dropstream/stream"
)

// Stage names, also the consumer groups.
const (
	StageProjection           = "avail-projection"
	StageAnalyticsTransitions = "avail-analytics-transitions"
	StageAnalyticsRuns        = "avail-analytics-runs"
)

// Defaults of the writer configs.
const (
	DefaultPartitions  = 8
	DefaultMaxSessions = 100
	DefaultMaxScan     = 10_000
	// DefaultRetainAfterDate is how long entities are kept after their date.
	DefaultRetainAfterDate = 7 * 24 * time.Hour
	DefaultBatchRows       = 10_000
	DefaultFlushInterval   = time.Second
	DefaultLinger          = 2 * time.Millisecond
	DefaultFlushTimeout    = 10 * time.Second
	DefaultMaxBackoff      = 5 * time.Second
	// DefaultAnalyticsHandlerTimeout is the analytics stages' handler
	// timeout: how long a handler waits for its row to reach ClickHouse.
	DefaultAnalyticsHandlerTimeout = 30 * time.Second
	// DefaultAnalyticsMaxDeliveries is the analytics stages' MaxDeliveries.
	// A delivery fails only when ClickHouse stays down for a whole handler
	// timeout, and a message is delivered again at most every ClaimIdle, so
	// an outage shorter than about 1000 × 60s (17 hours) dead-letters
	// nothing. Undecodable messages are dead-lettered at once anyway.
	DefaultAnalyticsMaxDeliveries = 1000
	// DefaultAnalyticsBatchSize is the analytics stages' read batch
	// (XREADGROUP COUNT). It is small so that copies of a stage share a
	// partition's backlog: each copy adds one waiting handler per partition,
	// and so rows to every flush.
	DefaultAnalyticsBatchSize = 16
)

// ProjectionConfig configures the projection. Zero fields take the defaults.
type ProjectionConfig struct {
	// Partitions of the availability topics; it must match the deployment
	// (avail.NewTopics). Default 8.
	Partitions int
	// MaxSessions is how many sessions are kept per entity, newest first.
	// Default 100.
	MaxSessions int
	// MaxScan bounds the index entries one List call examines when a filter
	// is not a key prefix. Default 10,000.
	MaxScan int
	// RetainAfterDate is how long an entity with a date (a slot, or a venue
	// on a date) is kept after the end of that date: its hash and sessions
	// expire then, and transitions arriving later are not stored. Default 7
	// days; negative keeps them forever. Entities without a date never
	// expire. Index entries of expired entities are removed by List when
	// it meets them and by Sweep.
	RetainAfterDate time.Duration
	// Runner tunes the stage's runner; zero fields take the stream defaults.
	Runner stream.RunnerConfig
}

// WithDefaults returns c with every zero field set to its default.
func (c ProjectionConfig) WithDefaults() ProjectionConfig {
	if c.Partitions == 0 {
		c.Partitions = DefaultPartitions
	}
	if c.MaxSessions == 0 {
		c.MaxSessions = DefaultMaxSessions
	}
	if c.MaxScan == 0 {
		c.MaxScan = DefaultMaxScan
	}
	if c.RetainAfterDate == 0 {
		c.RetainAfterDate = DefaultRetainAfterDate
	}
	return c
}

// Validate reports every invalid field of a defaulted config.
func (c ProjectionConfig) Validate() error {
	var errs []error
	if c.Partitions < 1 || c.Partitions > stream.MaxPartitions {
		errs = append(errs, fmt.Errorf("writer: partitions %d out of range 1..%d", c.Partitions, stream.MaxPartitions))
	}
	if c.MaxSessions < 1 || c.MaxSessions > 10_000 {
		errs = append(errs, fmt.Errorf("writer: max sessions %d out of range 1..10000", c.MaxSessions))
	}
	if c.MaxScan < 1 {
		errs = append(errs, fmt.Errorf("writer: max scan %d must be positive", c.MaxScan))
	}
	if err := c.Runner.WithDefaults(StageProjection).Validate(); err != nil {
		errs = append(errs, fmt.Errorf("writer: runner: %w", err))
	}
	return errors.Join(errs...)
}

// AnalyticsConfig configures the ClickHouse appends. Zero fields take the
// defaults.
//
// Each stage's handler hands its rows to the stage's batcher and waits until
// the batch holding them is in ClickHouse; only then is the message
// acknowledged. A batch is flushed when it holds BatchRows rows, when its
// oldest row has waited FlushInterval, or when no row has arrived for Linger,
// whichever comes first. The runtime runs one handler at a time per partition
// and copy, so a batch holds at most partitions × copies messages; Linger
// flushes as soon as they have all arrived instead of holding them for
// FlushInterval.
//
// Throughput is therefore about copies × partitions / flush latency: run the
// analytics stages with many copies (for example 16 to 32 per process, with a
// Redis pool of at least copies × partitions connections for the blocking
// reads); the small default read batch lets copies share a partition's
// backlog. A runtime batch or deferred-ack handler would remove this limit.
//
// While ClickHouse fails, the batcher retries the flush with backoff and the
// handlers keep waiting, up to their handler timeout; then their messages
// stay pending and are redelivered later. The backlog waits in the streams.
type AnalyticsConfig struct {
	// Partitions of the availability topics; it must match the deployment.
	// Default 8.
	Partitions int
	// BatchRows flushes a batch once it holds this many rows. Default 10,000.
	BatchRows int
	// FlushInterval flushes a batch once its oldest row has waited this
	// long. Default 1s.
	FlushInterval time.Duration
	// Linger flushes a batch once no row has arrived for this long. Default
	// 2ms; a negative value turns it off (then only BatchRows and
	// FlushInterval flush).
	Linger time.Duration
	// FlushTimeout bounds one insert attempt. Default 10s.
	FlushTimeout time.Duration
	// MaxBackoff caps the pause between failed flush attempts, which starts
	// at 50ms and doubles. Default 5s.
	MaxBackoff time.Duration
	// RetainAfterDate is how long the Redis state pairing an entity's opens
	// and closes is kept after the end of the entity's date. Default 7 days;
	// negative keeps it forever. Rows are written to ClickHouse whatever
	// their date.
	RetainAfterDate time.Duration
	// Runner tunes both stages' runners. Zero fields take the stream
	// defaults, except HandlerTimeout (default 30s, and at least
	// FlushInterval + FlushTimeout), ClaimIdle (default twice
	// HandlerTimeout), MaxDeliveries (default 1000, see
	// DefaultAnalyticsMaxDeliveries) and BatchSize (default 16). In-process
	// retries are always off: the batcher retries flushes itself.
	Runner stream.RunnerConfig
}

// WithDefaults returns c with every zero field set to its default.
func (c AnalyticsConfig) WithDefaults() AnalyticsConfig {
	if c.Partitions == 0 {
		c.Partitions = DefaultPartitions
	}
	if c.BatchRows == 0 {
		c.BatchRows = DefaultBatchRows
	}
	if c.FlushInterval == 0 {
		c.FlushInterval = DefaultFlushInterval
	}
	if c.Linger == 0 {
		c.Linger = DefaultLinger
	}
	if c.FlushTimeout == 0 {
		c.FlushTimeout = DefaultFlushTimeout
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = DefaultMaxBackoff
	}
	if c.RetainAfterDate == 0 {
		c.RetainAfterDate = DefaultRetainAfterDate
	}
	if c.Runner.HandlerTimeout == 0 {
		c.Runner.HandlerTimeout = DefaultAnalyticsHandlerTimeout
	}
	if c.Runner.ClaimIdle == 0 {
		c.Runner.ClaimIdle = 2 * c.Runner.HandlerTimeout
	}
	if c.Runner.MaxDeliveries == 0 {
		c.Runner.MaxDeliveries = DefaultAnalyticsMaxDeliveries
	}
	if c.Runner.BatchSize == 0 {
		c.Runner.BatchSize = DefaultAnalyticsBatchSize
	}
	c.Runner.Retry = stream.RetryConfig{Disabled: true}
	return c
}

// Validate reports every invalid field of a defaulted config.
func (c AnalyticsConfig) Validate() error {
	var errs []error
	if c.Partitions < 1 || c.Partitions > stream.MaxPartitions {
		errs = append(errs, fmt.Errorf("writer: partitions %d out of range 1..%d", c.Partitions, stream.MaxPartitions))
	}
	if c.BatchRows < 1 || c.BatchRows > 1_000_000 {
		errs = append(errs, fmt.Errorf("writer: batch rows %d out of range 1..1000000", c.BatchRows))
	}
	if c.FlushInterval <= 0 || c.FlushTimeout <= 0 || c.MaxBackoff <= 0 {
		errs = append(errs, fmt.Errorf("writer: flush interval %s, flush timeout %s and max backoff %s must be positive",
			c.FlushInterval, c.FlushTimeout, c.MaxBackoff))
	}
	if c.Linger > c.FlushInterval {
		errs = append(errs, fmt.Errorf("writer: linger %s exceeds flush interval %s", c.Linger, c.FlushInterval))
	}
	if c.Runner.HandlerTimeout < c.FlushInterval+c.FlushTimeout {
		errs = append(errs, fmt.Errorf("writer: handler timeout %s below flush interval + flush timeout %s",
			c.Runner.HandlerTimeout, c.FlushInterval+c.FlushTimeout))
	}
	for _, stage := range []string{StageAnalyticsTransitions, StageAnalyticsRuns} {
		if err := c.Runner.WithDefaults(stage).Validate(); err != nil {
			errs = append(errs, fmt.Errorf("writer: runner of %s: %w", stage, err))
			break
		}
	}
	return errors.Join(errs...)
}
