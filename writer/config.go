package writer

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer/sink"
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
	// DefaultAnalyticsBatchSize is the analytics stages' read batch
	// (XREADGROUP COUNT): the messages of one partition one handler call
	// gets, and so the rows it adds to a flush.
	DefaultAnalyticsBatchSize = 5000
	// DefaultTransitionsBatchSize is the transitions stage's read batch.
	// Its entries hold up to 64 transitions each. 5,000 held a whole
	// backlog in memory and cost twice the Go CPU per transition; 500 made
	// ClickHouse parts so small that merging them cost a quarter more CPU
	// (BENCHMARKS.md, "the long backlog").
	DefaultTransitionsBatchSize = 1000
	// DefaultReadAhead is the copies of each analytics stage that
	// Analytics.Stages returns.
	DefaultReadAhead = 2
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
	c.Partitions = cmp.Or(c.Partitions, DefaultPartitions)
	c.MaxSessions = cmp.Or(c.MaxSessions, DefaultMaxSessions)
	c.MaxScan = cmp.Or(c.MaxScan, DefaultMaxScan)
	c.RetainAfterDate = cmp.Or(c.RetainAfterDate, DefaultRetainAfterDate)
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
// Both analytics stages are batch stages (stream.BatchHandler): a handler
// gets the batch the runner read from one partition (XREADGROUP COUNT
// Runner.BatchSize, default 5,000), decodes it into rows (a session row
// per raw transition, see Analytics), hands its rows to the stage's
// batcher and waits until the flush holding them is in ClickHouse; only
// then are the batch's messages acknowledged. Stages returns ReadAhead
// copies of each stage, so that while one copy's batches wait for their
// INSERT, another copy reads and decodes the next batches of the
// same partitions. The stage's batcher, shared by its copies, merges the
// batches of every partition and copy into one INSERT per table, a batch
// never split, one flush at a time: batches queued during a flush go into
// the next one (at low rates, one insert per FlushInterval whatever the
// number of copies). It flushes:
//
//   - at once when it holds BatchRows rows (N);
//   - when a full batch is queued (the read returned all the messages it
//     asked for, so its partition holds more and waiting for rows is
//     pointless), or a redelivered one, or the previous flush held one:
//     after Linger without a new batch once no handler is still decoding
//     its batch, so the batches of every partition read at once
//     share a flush, back to back while a backlog lasts;
//   - otherwise when its oldest batch has waited FlushInterval (T): at low
//     rates a stage inserts about once per FlushInterval, and rows wait at
//     most about that long. Meanwhile the waiting partitions read nothing,
//     so a rate above partitions × copies × BatchSize per FlushInterval
//     fills the next batches and switches to the previous rule.
//
// With the defaults, a flush holds up to BatchRows (100,000) rows of whole
// batches: under a backlog, the batches of 8 partitions × 5,000 messages
// of one or both copies (40,000 or 80,000 transitions, plus their session
// rows). Up to ReadAhead × partitions × BatchSize messages are read and not
// yet acknowledged, held in memory with their rows while they wait.
//
// Why merge: an INSERT into a MergeTree table writes a part, a file per
// column (and one more part per materialized view), and costs tens of
// milliseconds of ClickHouse time whatever its size (about 15 ms, plus the
// rollup's, for the transitions table on the project's machine), and every
// part is merged again later: measured on ClickHouse 18.16 with the bench's
// backlog, inserts of about 15,000 transitions cost the server about 7 µs
// per transition, inserts of about 35,000 about 4 µs. So throughput comes
// from rows per insert, and small frequent inserts take CPU from everything
// else on the machine.
//
// While ClickHouse fails, the batcher retries the flush with backoff and the
// handlers keep waiting, up to their handler timeout. If ClickHouse did not
// answer (a refused or lost connection, no answer within FlushTimeout), a
// handler at its deadline returns stream.Hold: the runner keeps the batch
// in hand and calls the handler again, so the held batches are written
// within MaxBackoff of ClickHouse answering, not ClaimIdle later, and no
// delivery is counted. Otherwise (ClickHouse refused the rows) the messages
// stay pending and are redelivered after ClaimIdle. Meanwhile each
// partition's loop is busy, so the rest of the backlog waits in the
// streams, unread. A failure episode is logged once when it starts and
// once when it ends (see sink.Batcher), and sink.MetricSinkFailingFor
// measures it. A flush under way when a handler's deadline passes is
// waited for, so a batch is never inserted twice by one process. A message
// that cannot be decoded is dead-lettered (stream.Permanent in a
// *stream.BatchError) and the rest of its batch is written.
type AnalyticsConfig struct {
	// Partitions of the availability topics; it must match the deployment.
	// Default 8.
	Partitions int
	// BatchRows (N) flushes once the queued batches hold this many rows.
	// Default 100,000.
	BatchRows int
	// FlushInterval (T) flushes once the oldest queued batch has waited
	// this long. Default 1s.
	FlushInterval time.Duration
	// Linger flushes full or redelivered batches once no batch has arrived
	// for this long (see above). Default 5ms; a negative value turns it off
	// (then only BatchRows and FlushInterval flush).
	Linger time.Duration
	// FlushTimeout bounds one flush attempt (every table). Default 10s.
	FlushTimeout time.Duration
	// MaxBackoff caps the pause between failed flush attempts, which starts
	// at 50ms and doubles. Default 5s.
	MaxBackoff time.Duration
	// ReadAhead is how many batches of each partition a stage handles at
	// once: Stages returns this many copies of each stage, each a consumer
	// of the stage's group (they share the stage's batcher), so that while
	// one copy's batches wait for their INSERT another's are read, decoded
	// and paired. Default 2 (DefaultReadAhead), at most sink.MaxReadAhead.
	ReadAhead int
	// Runner tunes both stages' runners; zero fields take the stream
	// defaults, except: HandlerTimeout 30s (at least FlushInterval +
	// FlushTimeout), ClaimIdle twice HandlerTimeout, MaxDeliveries 1000,
	// BatchSize 5,000, and ReadBytes stream.MaxReadBytes (reads go by
	// count). Retries are off: the batcher retries its flushes.
	Runner stream.RunnerConfig
	// TransitionsBatchSize is the transitions stage's BatchSize, in place
	// of Runner's: entries of up to 64 transitions. Default 1,000
	// (DefaultTransitionsBatchSize), at most stream.MaxBatchSize.
	TransitionsBatchSize int
}

// WithDefaults returns c with every zero field set to its default.
func (c AnalyticsConfig) WithDefaults() AnalyticsConfig {
	c.Partitions = cmp.Or(c.Partitions, DefaultPartitions)
	c.ReadAhead = cmp.Or(c.ReadAhead, DefaultReadAhead)
	b := c.batching().WithDefaults()
	c.BatchRows, c.FlushInterval, c.Linger, c.FlushTimeout, c.MaxBackoff = b.BatchRows, b.FlushInterval, b.Linger, b.FlushTimeout, b.MaxBackoff
	c.Runner = sink.BatchRunner(c.Runner, DefaultAnalyticsBatchSize)
	c.TransitionsBatchSize = cmp.Or(c.TransitionsBatchSize, DefaultTransitionsBatchSize)
	return c
}

// Validate reports every invalid field of a defaulted config.
func (c AnalyticsConfig) Validate() error {
	var errs []error
	if c.Partitions < 1 || c.Partitions > stream.MaxPartitions {
		errs = append(errs, fmt.Errorf("writer: partitions %d out of range 1..%d", c.Partitions, stream.MaxPartitions))
	}
	errs = append(errs, c.batching().Validate(c.ReadAhead, c.Runner, StageAnalyticsTransitions, StageAnalyticsRuns))
	if c.TransitionsBatchSize < 1 || c.TransitionsBatchSize > stream.MaxBatchSize {
		errs = append(errs, fmt.Errorf("writer: transitions batch size %d out of range 1..%d", c.TransitionsBatchSize, stream.MaxBatchSize))
	}
	return errors.Join(errs...)
}

// batching returns when the analytics batchers flush.
func (c AnalyticsConfig) batching() sink.Batching {
	return sink.Batching{BatchRows: c.BatchRows, FlushInterval: c.FlushInterval, Linger: c.Linger,
		FlushTimeout: c.FlushTimeout, MaxBackoff: c.MaxBackoff}
}
