package writer

import (
	"errors"
	"fmt"
	"time"

	"github.com/dropstream/dropstream/internal/bounds"
	"github.com/dropstream/dropstream/internal/settings"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer/sink"
)

// Stage names, also the consumer groups.
const (
	StageProjection           = "avail-projection"
	StageAnalyticsTransitions = "avail-analytics-transitions"
	StageAnalyticsRuns        = "avail-analytics-runs"
)

// DefaultAnalyticsBatchSize is the analytics stages' read batch.
const DefaultAnalyticsBatchSize = 5000

// ProjectionConfig configures the projection. Zero fields take the defaults.
type ProjectionConfig struct {
	// Partitions of the availability topics, as deployed. Default 8.
	Partitions int `default:"8"`
	// MaxSessions is how many sessions are kept per entity. Default 100.
	MaxSessions int `default:"100" range:"1..10000"`
	// MaxScan bounds the index entries one unprefixed List scans. Default 10,000.
	MaxScan int `default:"10000" range:"1.."`
	// RetainAfterDate keeps a dated entity this long after its date ends.
	// Default 7 days; negative keeps it forever.
	RetainAfterDate time.Duration `default:"168h"`
	// ListCacheBytes bounds the pages a ListCache keeps; a page over 1/64
	// of it is not kept. Default 16 MiB; negative keeps none.
	ListCacheBytes int `default:"16777216"`
	// Runner tunes the stage's runner (stream defaults).
	Runner stream.RunnerConfig
}

// WithDefaults returns c with every zero field set to its default.
func (c ProjectionConfig) WithDefaults() ProjectionConfig {
	settings.Defaults(&c)
	return c
}

// Validate reports every invalid field of a defaulted config.
func (c ProjectionConfig) Validate() error {
	errs := bounds.Check([]error{settings.Check("writer", &c)}, "writer: partitions", c.Partitions, 1, stream.MaxPartitions)
	if err := c.Runner.WithDefaults(StageProjection).Validate(); err != nil {
		errs = append(errs, fmt.Errorf("writer: runner: %w", err))
	}
	return errors.Join(errs...)
}

// AnalyticsConfig configures the ClickHouse appends; zero fields default.
// Each stage feeds one sink.Batcher, one INSERT per table; large inserts
// cost less per row (BENCHMARKS.md).
type AnalyticsConfig struct {
	// Partitions of the availability topics, as deployed. Default 8.
	Partitions int `default:"8"`
	// Batching says when the batchers flush.
	sink.Batching
	// ReadAhead is the copies of each stage sharing its batcher. Default 2,
	// at most sink.MaxReadAhead.
	ReadAhead int `default:"2"`
	// Runner tunes both stages' runners, defaulted by sink.BatchRunner.
	Runner stream.RunnerConfig
	// TransitionsBatchSize replaces Runner.BatchSize for the transitions
	// stage. Default 1,000, at most stream.MaxBatchSize: 5,000 cost twice the
	// CPU, 500 a quarter more (BENCHMARKS.md, "the long backlog").
	TransitionsBatchSize int `default:"1000"`
}

// WithDefaults returns c with every zero field set to its default.
func (c AnalyticsConfig) WithDefaults() AnalyticsConfig {
	settings.Defaults(&c)
	c.Batching = c.Batching.WithDefaults()
	c.Runner = sink.BatchRunner(c.Runner, DefaultAnalyticsBatchSize)
	return c
}

// Validate reports every invalid field of a defaulted config.
func (c AnalyticsConfig) Validate() error {
	errs := bounds.Check(nil, "writer: partitions", c.Partitions, 1, stream.MaxPartitions)
	errs = append(errs, c.Batching.Validate(c.ReadAhead, c.Runner, StageAnalyticsTransitions, StageAnalyticsRuns))
	errs = bounds.Check(errs, "writer: transitions batch size", c.TransitionsBatchSize, 1, stream.MaxBatchSize)
	return errors.Join(errs...)
}
