package sink

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"go.opentelemetry.io/otel/metric"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/internal/bounds"
	"github.com/dropstream/dropstream/stream"
)

// DefaultHistoryBatchSize is a history stage's read batch (XREADGROUP
// COUNT) unless HistoryConfig.Runner sets one.
const DefaultHistoryBatchSize = 1000

// HistoryConfig configures a flow's ClickHouse append. Zero batching
// fields default. Rows are written at least once, so the table must
// collapse duplicates.
type HistoryConfig[R any] struct {
	// Stage names the stage and its consumer group ("<flow>-history").
	Stage string
	// Topic is the topic the stage reads.
	Topic stream.Topic
	// Tables are the tables Insert writes, the first being the one whose
	// rows MetricRowsWritten counts (attribute table).
	Tables []string
	// Rows returns the rows of one message. An error dead-letters the
	// message (stream.ErrDrop drops it).
	Rows func(m *stream.Message) ([]R, error)
	// Insert appends rows to ClickHouse in one batch per table. It must be
	// safe for concurrent use (flushes are one at a time per History).
	Insert func(ctx context.Context, ch *clickhouse.Client, rows []R) error

	// Batching says when the batcher flushes.
	Batching
	// ReadAhead is the copies of the stage sharing the batcher. Default 1,
	// at most MaxReadAhead.
	ReadAhead int
	// Runner tunes the stage's runner; zero fields take BatchRunner's
	// defaults, BatchSize DefaultHistoryBatchSize.
	Runner stream.RunnerConfig
}

// WithDefaults returns c with every zero field set to its default.
func (c HistoryConfig[R]) WithDefaults() HistoryConfig[R] {
	c.ReadAhead = cmp.Or(c.ReadAhead, 1)
	c.Batching = c.Batching.WithDefaults()
	c.Runner = BatchRunner(c.Runner, DefaultHistoryBatchSize)
	return c
}

// Validate reports every invalid field of a defaulted config.
func (c HistoryConfig[R]) Validate() error {
	errs := bounds.Require(nil, c.Stage != "" && len(c.Tables) > 0 && c.Rows != nil && c.Insert != nil,
		"writer: history %q needs a stage name, tables, Rows and Insert", c.Stage)
	if err := c.Topic.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("writer: history %s: %w", c.Stage, err))
	}
	errs = append(errs, c.Batching.Validate(c.ReadAhead, c.Runner, c.Stage))
	return errors.Join(errs...)
}

// History is a flow's ClickHouse append (see HistoryConfig). Call Close
// once its stages' runners have stopped. It is safe for concurrent use.
type History[R any] struct {
	ch       *clickhouse.Client
	cfg      HistoryConfig[R]
	met      *Metrics
	reg      metric.Registration
	batcher  *Batcher[[]R]
	rowsAttr metric.MeasurementOption
	closed   atomic.Bool
}

// NewHistory validates cfg (after defaults) and starts the flush loop,
// reporting through tel (nil fields: the globals).
func NewHistory[R any](ch *clickhouse.Client, cfg HistoryConfig[R], tel stream.Telemetry) (*History[R], error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if ch == nil {
		return nil, fmt.Errorf("writer: history %s needs a ClickHouse client", cfg.Stage)
	}
	met, tracer, log, err := Instruments(tel)
	if err != nil {
		return nil, err
	}
	h := &History[R]{ch: ch, cfg: cfg, met: met, rowsAttr: metric.WithAttributes(keyTable.String(cfg.Tables[0]))}
	h.batcher = NewBatcher(cfg.Stage, cfg.Batching, met, log, tracer, h.flush)
	if h.reg, err = met.Observe(h.batcher); err != nil {
		h.batcher.Close()
		return nil, err
	}
	return h, nil
}

// Stage returns the stage: run it in any number of copies (each a
// consumer of the group); they share the batcher.
func (h *History[R]) Stage() stream.Stage {
	return stream.Stage{Name: h.cfg.Stage, Topic: h.cfg.Topic, Config: h.cfg.Runner, BatchHandler: h.Handle}
}

// Stages returns ReadAhead copies of the stage, sharing the batcher
// (Copies).
func (h *History[R]) Stages() []stream.Stage { return Copies(h.cfg.ReadAhead, h.Stage()) }

// Copies returns n copies of each stage, copy by copy. When a stage's
// Runner.Consumer is set, copies after the first append "-<copy>" to it.
func Copies(n int, stages ...stream.Stage) []stream.Stage {
	out := make([]stream.Stage, 0, n*len(stages))
	for i := range n {
		for _, s := range stages {
			if c := s.Config.Consumer; c != "" && i > 0 {
				s.Config.Consumer = fmt.Sprintf("%s-%d", c, i)
			}
			out = append(out, s)
		}
	}
	return out
}

// Handle is the stage's batch handler: it returns nil once the rows are in
// ClickHouse; at its deadline the messages stay pending.
func (h *History[R]) Handle(ctx context.Context, msgs []*stream.Message) error {
	rows, errs := h.rows(msgs)
	var err error
	if len(rows) > 0 {
		err = h.batcher.Add(ctx, rows, len(rows), len(msgs), Urgent(msgs, h.cfg.Runner.BatchSize))
	}
	return Settle(errs, err)
}

// rows decodes msgs, while the batcher knows that a batch is coming.
func (h *History[R]) rows(msgs []*stream.Message) ([]R, []error) {
	h.batcher.Begin()
	defer h.batcher.End()
	errs := make([]error, len(msgs))
	var rows []R
	for i, m := range msgs {
		rs, err := h.cfg.Rows(m)
		switch {
		case err == nil:
			rows = append(rows, rs...)
		case errors.Is(err, stream.ErrDrop) || stream.IsPermanent(err):
			errs[i] = err
		default:
			errs[i] = stream.Permanent(err)
		}
	}
	return rows, errs
}

// flush inserts the batches' rows in one Insert.
func (h *History[R]) flush(ctx context.Context, batches [][]R) error {
	all := slices.Concat(batches...)
	if err := h.cfg.Insert(ctx, h.ch, all); err != nil {
		return fmt.Errorf("writer: %s: %w", h.cfg.Stage, err)
	}
	h.met.rows.Add(context.Background(), int64(len(all)), h.rowsAttr)
	return nil
}

// Close stops the flush loop after the flush in progress; waiting and
// later handlers fail with ErrClosed. It is idempotent.
func (h *History[R]) Close() error {
	if !h.closed.CompareAndSwap(false, true) {
		return nil
	}
	h.batcher.Close()
	if err := h.reg.Unregister(); err != nil {
		return fmt.Errorf("writer: history %s close: %w", h.cfg.Stage, err)
	}
	return nil
}
