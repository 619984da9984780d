// Package sink is the batched ClickHouse append of every flow's history:
// a stage hands each batch's rows to a Batcher and acknowledges it once
// written; while ClickHouse is down the backlog waits in the stream.
package sink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/dropstream/dropstream/internal/tick"
	dsotel "github.com/dropstream/dropstream/otel"
	"github.com/dropstream/dropstream/stream"
)

// ErrClosed is wrapped by Add on a closed Batcher; the rows were not written.
var ErrClosed = errors.New("writer: analytics closed")

// maxLinks caps the span links of one flush span.
const maxLinks = 128

// Batcher writes the items handlers Add in one flush call. An item (one
// partition's batch) is never split. It flushes once BatchRows rows wait,
// once the oldest item has waited FlushInterval, or Linger after the last
// Add while an urgent item waits. A failed flush is retried with backoff;
// a written item is never reported unwritten. Handlers call Begin before
// decoding, End after, then Add. It is safe for concurrent use.
type Batcher[E any] struct {
	stage  string
	cfg    Batching
	flush  func(ctx context.Context, items []E) error
	met    *Metrics
	log    *slog.Logger
	tracer trace.Tracer
	attrs  metric.MeasurementOption

	mu       sync.Mutex
	queue    []*waiter[E]
	queued   int // rows in queue
	buffered int // rows in queue or in the batch being flushed
	last     time.Time
	lastErr  error
	closed   bool
	active   int  // handlers between Begin and End
	urgent   bool // the last successful flush held an urgent item
	// urgentAt ends the last successful urgent flush (backlog tail until +FlushInterval).
	urgentAt time.Time
	// failingSince starts the current failure episode (zero: none);
	// failures counts its failed attempts.
	failingSince time.Time
	failures     int

	wake   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

type waiter[E any] struct {
	item     E
	rows     int
	msgs     int // messages whose rows item holds
	urgent   bool
	flushing bool // in the flush under way
	at       time.Time
	ctx      context.Context
	res      chan error // receives the outcome once
}

// NewBatcher starts a batcher for stage writing with flush (one call at a
// time) and reporting to met; Close stops it.
func NewBatcher[E any](stage string, cfg Batching, met *Metrics, log *slog.Logger,
	tracer trace.Tracer, flush func(context.Context, []E) error) *Batcher[E] {
	ctx, cancel := context.WithCancel(context.Background())
	b := &Batcher[E]{stage: stage, cfg: cfg, flush: flush, met: met, log: log, tracer: tracer,
		attrs: metric.WithAttributeSet(attribute.NewSet(keyStage.String(stage))),
		wake:  make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	go b.run(ctx)
	return b
}

// StageName returns the stage the batcher writes for.
func (b *Batcher[E]) StageName() string { return b.stage }

// Health is what the batcher's gauges report (see Metrics).
type Health struct {
	Buffered   int           // rows queued or being flushed
	FailingFor time.Duration // since the first failed flush of the episode; 0 when the last flush succeeded
	Failures   int           // failed flushes since the last successful one
}

// Health returns the state the gauges report.
func (b *Batcher[E]) Health() Health {
	b.mu.Lock()
	defer b.mu.Unlock()
	h := Health{Buffered: b.buffered, Failures: b.failures}
	if !b.failingSince.IsZero() {
		h.FailingFor = time.Since(b.failingSince)
	}
	return h
}

// Begin holds Linger flushes while a handler prepares an item, until End.
func (b *Batcher[E]) Begin() {
	b.mu.Lock()
	b.active++
	b.mu.Unlock()
}

// End undoes Begin, before the handler's Add (or instead of it).
func (b *Batcher[E]) End() {
	b.mu.Lock()
	b.active--
	b.mu.Unlock()
	b.signal()
}

func (b *Batcher[E]) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// Add queues item and waits until it is flushed, ctx ends or the batcher
// closes; urgent asks for a flush after Linger. An ended ctx is marked
// stream.Hold while the sink does not answer.
func (b *Batcher[E]) Add(ctx context.Context, item E, rows, msgs int, urgent bool) error {
	w := &waiter[E]{item: item, rows: rows, msgs: msgs, urgent: urgent, at: time.Now(), ctx: ctx, res: make(chan error, 1)}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return fmt.Errorf("%s: %w", b.stage, ErrClosed)
	}
	b.queue = append(b.queue, w)
	b.queued += rows
	b.buffered += rows
	b.last = w.at
	b.mu.Unlock()
	b.signal()
	select {
	case err := <-w.res:
		return err
	case <-ctx.Done():
		b.mu.Lock()
		select {
		case err := <-w.res: // settled as ctx ended
			b.mu.Unlock()
			return err
		default:
		}
		last, flushing := b.lastErr, w.flushing
		b.mu.Unlock()
		if flushing { // its flush decides; a failure still names the deadline
			err := <-w.res
			if err != nil && !errors.Is(err, ctx.Err()) {
				err = fmt.Errorf("%w: %w", ctx.Err(), err)
			}
			return err
		}
		if last == nil { // queued behind flushes slower than the deadline
			return stream.Hold(fmt.Errorf("writer: %s: rows not written before the handler's deadline: %w", b.stage, ctx.Err()))
		}
		err := fmt.Errorf("writer: %s: rows not written before the handler's deadline: %w (last flush: %w)",
			b.stage, ctx.Err(), last)
		if sinkDown(last) {
			return stream.Hold(err)
		}
		return err
	}
}

// sinkDown reports whether ClickHouse did not answer (not refused the rows):
// such batches are held, not left to redelivery.
func sinkDown(err error) bool {
	return stream.IsUnavailable(err) || errors.Is(err, context.DeadlineExceeded)
}

// Close stops after any flush in progress and fails queued waiters with ErrClosed.
func (b *Batcher[E]) Close() {
	b.cancel()
	<-b.done
}

func (b *Batcher[E]) run(ctx context.Context) {
	defer close(b.done)
	defer b.failAll()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	bo := stream.NewBackoff(50*time.Millisecond, b.cfg.MaxBackoff, 0)
	for {
		due, ok := b.due()
		if wait := time.Until(due); !ok || wait > 0 {
			if ok {
				timer.Reset(wait)
			}
			select { // the stopped timer of an empty queue never fires
			case <-ctx.Done():
				return
			case <-b.wake:
			case <-timer.C:
			}
			timer.Stop()
			continue
		}
		if err := b.flushOnce(ctx); err == nil {
			bo.Reset()
			continue
		}
		if tick.Sleep(ctx, bo.NextBackOff()) != nil {
			return
		}
	}
}

// tailLingers is how many Lingers a drained backlog's tail waits (see due).
const tailLingers = 20

// due returns when the queue must be flushed; ok is false when it is empty.
func (b *Batcher[E]) due() (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) == 0 {
		return time.Time{}, false
	}
	if b.queued >= b.cfg.BatchRows {
		return time.Now(), true
	}
	due := b.queue[0].at.Add(b.cfg.FlushInterval)
	// Linger applies when the queue holds an urgent item, or the previous
	// flush held one.
	if l := b.last.Add(b.cfg.Linger); b.cfg.Linger > 0 && b.active == 0 && l.Before(due) &&
		(b.urgent || slices.ContainsFunc(b.queue, func(w *waiter[E]) bool { return w.urgent })) {
		due = l
	}
	// A drained backlog's last partial reads go together tailLingers ×
	// Linger later, not a whole FlushInterval.
	if b.cfg.Linger > 0 && !b.urgentAt.IsZero() && time.Since(b.urgentAt) < b.cfg.FlushInterval {
		if t := b.queue[0].at.Add(tailLingers * b.cfg.Linger); t.Before(due) {
			due = t
		}
	}
	return due, true
}

// take removes up to BatchRows rows of live waiters from the queue head.
func (b *Batcher[E]) take() []*waiter[E] {
	b.mu.Lock()
	defer b.mu.Unlock()
	var batch []*waiter[E]
	rows, i := 0, 0
	for ; i < len(b.queue) && (rows == 0 || rows+b.queue[i].rows <= b.cfg.BatchRows); i++ {
		w := b.queue[i]
		b.queued -= w.rows
		if w.ctx.Err() != nil {
			b.buffered -= w.rows
			continue
		}
		w.flushing = true
		batch = append(batch, w)
		rows += w.rows
	}
	b.queue = append(b.queue[:0:0], b.queue[i:]...)
	return batch
}

// flushOnce flushes one batch; on failure live waiters go back to the head.
func (b *Batcher[E]) flushOnce(ctx context.Context) error {
	batch := b.take()
	if len(batch) == 0 {
		return nil
	}
	items := make([]E, len(batch))
	links := make([]trace.Link, 0, min(len(batch), maxLinks))
	rows := 0
	for i, w := range batch {
		items[i] = w.item
		rows += w.rows
		if sc := trace.SpanContextFromContext(w.ctx); sc.IsValid() && len(links) < maxLinks {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	// A flush under way finishes on close, within FlushTimeout.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.cfg.FlushTimeout)
	defer cancel()
	fctx, span := b.tracer.Start(fctx, "flush "+b.stage, trace.WithLinks(links...),
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
			attribute.String("db.system", "clickhouse"), attribute.Int("dropstream.writer.rows", rows),
			dsotel.MessagingBatchMessageCountKey.Int(len(batch))))
	defer span.End()
	start := time.Now()
	err := b.flush(fctx, items)
	outcome := "ok"
	if err != nil {
		outcome = "error"
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	bg := context.Background() // no exemplars from the flush span
	b.met.duration.Record(bg, time.Since(start).Seconds(), b.attrs,
		metric.WithAttributes(keyOutcome.String(outcome)))
	b.mu.Lock()
	for _, w := range batch {
		w.flushing = false
	}
	if err == nil {
		b.recovered(batch, rows)
		b.buffered -= rows
		b.lastErr = nil
		b.urgent = slices.ContainsFunc(batch, func(w *waiter[E]) bool { return w.urgent })
		if b.urgent {
			b.urgentAt = time.Now()
		}
		for _, w := range batch {
			w.res <- nil // under b.mu: Add sees the outcome or the flush under way
		}
		b.mu.Unlock()
		return nil
	}
	b.lastErr = err
	// A waiter whose ctx ended gets this flush's outcome: held if the sink is down.
	late := fmt.Errorf("writer: %s: rows not written before the handler's deadline: %w", b.stage, err)
	if sinkDown(late) {
		late = stream.Hold(late)
	}
	live := batch[:0]
	liveRows, gone := 0, 0
	for _, w := range batch {
		if w.ctx.Err() != nil {
			b.buffered -= w.rows
			w.res <- late // its handler waited for this flush
			gone++
			continue
		}
		live = append(live, w)
		liveRows += w.rows
	}
	b.queue = append(live, b.queue...)
	b.queued += liveRows
	b.failures++
	first := b.failingSince.IsZero()
	if first {
		b.failingSince = start
	}
	b.mu.Unlock()
	b.met.errors.Add(bg, 1, b.attrs)
	if first {
		b.log.Warn("clickhouse write failing; the stage holds its batches and retries until it answers",
			"stage", b.stage, "rows", rows, "batches", len(batch), "error", err)
	} else {
		b.log.Debug("clickhouse flush failed again", "stage", b.stage, "attempt", b.failures, "error", err)
	}
	return err
}

// recovered ends any failure episode with one log line. b.mu is held.
func (b *Batcher[E]) recovered(batch []*waiter[E], rows int) {
	if b.failingSince.IsZero() {
		return
	}
	msgs := 0
	for _, w := range batch {
		msgs += w.msgs
	}
	for _, w := range b.queue {
		msgs += w.msgs
	}
	b.log.Info("clickhouse write recovered", "stage", b.stage, "down_for", time.Since(b.failingSince).Round(time.Millisecond),
		"failed_attempts", b.failures, "held_batches", len(batch)+len(b.queue), "held_messages", msgs,
		"held_rows", rows+b.queued, "last_error", b.lastErr)
	b.failingSince, b.failures = time.Time{}, 0
}

// failAll closes the batcher: queued waiters get ErrClosed, later adds too.
func (b *Batcher[E]) failAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for _, w := range b.queue {
		w.res <- fmt.Errorf("%s: %w", b.stage, ErrClosed)
	}
	b.queue = nil
	b.queued, b.buffered = 0, 0
}
