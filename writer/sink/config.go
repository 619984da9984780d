package sink

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/dropstream/dropstream/internal/bounds"
	"github.com/dropstream/dropstream/internal/settings"
	"github.com/dropstream/dropstream/stream"
)

// Defaults of the batched stages' runners, and the bound of their read-ahead.
const (
	// DefaultHandlerTimeout is how long a batched stage's handler waits
	// for its rows to reach ClickHouse.
	DefaultHandlerTimeout = 30 * time.Second
	// DefaultMaxDeliveries is a batched stage's MaxDeliveries: an outage
	// shorter than about 1000 × ClaimIdle (17 hours) dead-letters nothing.
	DefaultMaxDeliveries = 1000
	// MaxReadAhead bounds the copies of a batched stage sharing a batcher.
	MaxReadAhead = 16
)

// Batching says when a Batcher flushes and how it retries. Zero fields
// take the defaults; a negative Linger turns Linger off.
type Batching struct {
	// BatchRows flushes once the queued items hold this many rows.
	// Default 100,000.
	BatchRows int `default:"100000" range:"1..1000000"`
	// FlushInterval flushes once the oldest queued item has waited this
	// long. Default 1s.
	FlushInterval time.Duration `default:"1s"`
	// Linger flushes urgent items once no item has arrived for this long
	// (see Batcher). Default 5ms.
	Linger time.Duration `default:"5ms"`
	// FlushTimeout bounds one flush attempt. Default 10s.
	FlushTimeout time.Duration `default:"10s"`
	// MaxBackoff caps the pause between failed flush attempts, which
	// starts at 50ms and doubles. Default 5s.
	MaxBackoff time.Duration `default:"5s"`
}

// WithDefaults returns b with every zero field set to its default.
func (b Batching) WithDefaults() Batching {
	settings.Defaults(&b)
	return b
}

// Validate reports every invalid setting of a defaulted Batching, the
// read-ahead and the stages' runner config.
func (b Batching) Validate(readAhead int, runner stream.RunnerConfig, stages ...string) error {
	errs := bounds.Check([]error{settings.Check("writer", &b)}, "writer: read ahead", readAhead, 1, MaxReadAhead)
	errs = bounds.Require(errs, b.FlushInterval > 0 && b.FlushTimeout > 0 && b.MaxBackoff > 0,
		"writer: flush interval %s, flush timeout %s and max backoff %s must be positive", b.FlushInterval, b.FlushTimeout, b.MaxBackoff)
	errs = bounds.Require(errs, b.Linger <= b.FlushInterval, "writer: linger %s exceeds flush interval %s", b.Linger, b.FlushInterval)
	errs = bounds.Require(errs, runner.HandlerTimeout >= b.FlushInterval+b.FlushTimeout,
		"writer: handler timeout %s below flush interval + flush timeout %s", runner.HandlerTimeout, b.FlushInterval+b.FlushTimeout)
	for _, stage := range stages {
		if err := runner.WithDefaults(stage).Validate(); err != nil {
			errs = append(errs, fmt.Errorf("writer: runner of %s: %w", stage, err))
			break
		}
	}
	return errors.Join(errs...)
}

// BatchRunner returns a batched stage's runner config: batchSize reads by
// count, defaults for timeouts, and no retries (the batcher retries).
func BatchRunner(r stream.RunnerConfig, batchSize int) stream.RunnerConfig {
	r.HandlerTimeout = cmp.Or(r.HandlerTimeout, DefaultHandlerTimeout)
	r.ClaimIdle = cmp.Or(r.ClaimIdle, 2*r.HandlerTimeout)
	r.MaxDeliveries = cmp.Or(r.MaxDeliveries, DefaultMaxDeliveries)
	r.BatchSize = cmp.Or(r.BatchSize, batchSize)
	r.ReadBytes = cmp.Or(r.ReadBytes, stream.MaxReadBytes)
	r.Retry = stream.RetryConfig{Disabled: true}
	return r
}

// Urgent reports whether a batch is to be flushed without waiting for
// FlushInterval: full, more waiting in its partition, or redelivered.
func Urgent(msgs []*stream.Message, batchSize int) bool {
	return len(msgs) >= batchSize || len(msgs) > 0 && (msgs[len(msgs)-1].MoreWaiting() || msgs[0].Attempt > 1)
}

// Settle returns a batch's outcome: errs (permanent) for the messages that
// did not decode, writeErr for the others; nil when every one is written.
func Settle(errs []error, writeErr error) error {
	if cmp.Or(errs...) == nil {
		return writeErr // nil, or the same for every message
	}
	for i, err := range errs {
		if err == nil {
			errs[i] = writeErr
		}
	}
	return &stream.BatchError{Errs: errs}
}
