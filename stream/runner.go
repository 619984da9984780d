package stream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/tick"
)

// Stage is a named handler over one topic.
type Stage struct {
	// Name identifies the stage in telemetry and is its default group.
	Name string
	// Topic is the stream the stage consumes.
	Topic Topic
	// Handler processes each message. Exactly one of Handler and
	// BatchHandler is set.
	Handler Handler
	// BatchHandler processes each batch read from a partition, with one
	// span per batch linked to every message's producer.
	BatchHandler BatchHandler
	// Config tunes the runner; zero fields take their defaults.
	Config RunnerConfig
}

// Runner runs one copy of a stage, consuming its partitions through its
// consumer group until its context ends; each message goes to one copy.
type Runner struct {
	rdb     redis.UniversalClient
	reads   redis.UniversalClient // blocking reads (readClient), set by Run
	stage   Stage
	cfg     RunnerConfig
	tel     Telemetry
	info    StageInfo
	handler Handler
	batch   *batchRunner
	stats   atomic.Pointer[stageStats]    // set while Run runs
	lease   atomic.Pointer[consumerLease] // set by Run once it holds its consumer name
	settled *outcomeCounter
	gate    pauseGate
	started chan struct{} // closed once Run has its groups, accounting and lease
	once    sync.Once
}

// Started is closed once Run has created the groups, read the accounting and
// taken its consumer name: from then on a published message is handled.
func (r *Runner) Started() <-chan struct{} { return r.started }

// NewRunner checks the stage and builds its middleware chain.
func NewRunner(rdb redis.UniversalClient, stage Stage, tel Telemetry) (*Runner, error) {
	if stage.Name == "" || (stage.Handler == nil) == (stage.BatchHandler == nil) {
		return nil, errors.New("stream: stage needs a name and exactly one of Handler and BatchHandler")
	}
	if err := stage.Topic.Validate(); err != nil {
		return nil, fmt.Errorf("stage %s: %w", stage.Name, err)
	}
	cfg := stage.Config.WithDefaults(stage.Name)
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("stage %s: %w", stage.Name, err)
	}
	if len(cfg.Partitions) == 0 {
		for p := 0; p < stage.Topic.Partitions; p++ {
			cfg.Partitions = append(cfg.Partitions, p)
		}
	}
	for _, p := range cfg.Partitions {
		if p < 0 || p >= stage.Topic.Partitions {
			return nil, fmt.Errorf("stage %s: partition %d not in topic %s", stage.Name, p, stage.Topic)
		}
	}
	tel = tel.WithDefaults()
	info := StageInfo{Stage: stage.Name, Topic: stage.Topic, Group: cfg.Group, Consumer: cfg.Consumer}
	r := &Runner{rdb: rdb, stage: stage, cfg: cfg, tel: tel, info: info, settled: newOutcomeCounter(tel.MeterProvider, info),
		started: make(chan struct{})}
	if stage.BatchHandler != nil {
		r.batch = newBatchRunner(stage.BatchHandler, cfg, tel, info)
	} else {
		r.handler = Chain(stage.Handler,
			tracing(tel.TracerProvider, tel.Propagator, info),
			Metrics(tel.MeterProvider, info),
			Logging(tel.Logger, info),
			GiveUp(cfg.MaxDeliveries),
			Retry(cfg.Retry),
			Timeout(cfg.HandlerTimeout),
			Recovery())
	}
	return r, nil
}

// Info returns the stage's identity, including its consumer name.
func (r *Runner) Info() StageInfo { return r.info }

// Run consumes until ctx ends, finishes the batch in hand within
// HandlerTimeout, acknowledges it and returns nil. While another copy holds
// its consumer name it reads nothing (see LeaseErr). Redis errors are retried
// with backoff; Run returns an error only if it cannot start.
func (r *Runner) Run(ctx context.Context) error {
	for _, p := range r.cfg.Partitions {
		if err := createGroup(ctx, r.rdb, r.stage.Topic, p, r.cfg.Group); err != nil {
			return err
		}
	}
	// The group's accounting base, in up to 5 tries: a passing Redis error
	// at start (a reply lost, a failover) must not stop the stage.
	if _, err := backoff.Retry(ctx, func() (snapshot, error) {
		return conserve(ctx, r.rdb, r.stage.Topic, r.cfg.Group, r.cfg.Partitions, true)
	}, backoff.WithBackOff(NewBackoff(50*time.Millisecond, r.cfg.ErrorBackoff, 0)), backoff.WithMaxTries(5), backoff.WithMaxElapsedTime(0),
		backoff.WithNotify(func(err error, pause time.Duration) {
			r.tel.Logger.WarnContext(ctx, "stage accounting not read; retrying", "stage", r.stage.Name, "error", err, "retry_in", pause)
		})); err != nil {
		return err
	}
	stats, err := newStageStats(r)
	if err != nil {
		return err
	}
	defer stats.close()
	lease, err := r.acquireLease(ctx)
	if err != nil {
		return err
	}
	r.stats.Store(stats)
	r.lease.Store(lease)
	r.checkPaused(ctx)
	reads, closeReads := readClient(r.rdb, len(r.cfg.Partitions))
	defer closeReads()
	r.reads = reads
	r.tel.Logger.InfoContext(ctx, "stage started", "stage", r.stage.Name, "stream", r.stage.Topic.String(),
		"group", r.cfg.Group, "consumer", r.cfg.Consumer, "partitions", len(r.cfg.Partitions))
	r.once.Do(func() { close(r.started) })
	consuming, stopConsuming := context.WithCancel(ctx)
	defer stopConsuming()
	background, stopBackground := context.WithCancel(context.WithoutCancel(ctx))
	var bg sync.WaitGroup
	bg.Go(func() { stats.run(consuming) })
	bg.Go(func() { r.sweepConsumers(consuming) })
	bg.Go(func() { r.watchPaused(consuming) })
	bg.Go(func() { lease.hold(background) })
	var wg sync.WaitGroup
	for _, p := range r.cfg.Partitions {
		wg.Go(func() { r.consume(consuming, p) })
	}
	wg.Wait()
	stopBackground()
	bg.Wait()
	if lease.standing(0) { // every loop has left: whether another copy holds the name
		// The name, and the consumer under it, are the other copy's.
		r.tel.Logger.Info("stage stopped; its consumer name is held by another copy", "stage", r.stage.Name, "consumer", r.cfg.Consumer)
		return nil
	}
	done := context.WithoutCancel(ctx)
	r.retire(done)
	lease.release(done)
	r.tel.Logger.Info("stage stopped", "stage", r.stage.Name, "consumer", r.cfg.Consumer)
	return nil
}

// partitionState is one partition's reading position.
type partitionState struct {
	p         int
	stream    string
	ownFrom   string // next own pending entry to look at; "" once drained
	claimFrom string // next stale entry to look at
	nextClaim time.Time
	redeliver []pendingEntry
	acks      ackSet // settled, to acknowledge with the next read
	// nextRequeue is when parked messages may be due next (see requeueDue).
	nextRequeue time.Time
	traces      traceReuse // the trace context extracted last
	entries     entryReuse // the type and trace context read last
	size        readSize   // how large the partition's entries are
	leaseGen    int        // the generation of the lease seen last (see holdWhileUnleased)
}

// consume is the loop of one partition: own pending entries first, then
// stale entries every ClaimInterval, then new entries; nothing while the
// stage is paused or the lease unconfirmed. Redis commands run under io,
// which outlives stop; handlers under work, which ends HandlerTimeout after
// stop (see drainContext).
func (r *Runner) consume(stop context.Context, p int) {
	io := context.WithoutCancel(stop)
	work, cancel := drainContext(stop, r.cfg.HandlerTimeout)
	defer cancel()
	st := &partitionState{p: p, stream: r.stage.Topic.Stream(p), ownFrom: "-", claimFrom: "-", nextClaim: time.Now(), nextRequeue: time.Now()}
	bo := NewBackoff(50*time.Millisecond, r.cfg.ErrorBackoff, 0)
	for stop.Err() == nil {
		if r.holdWhilePaused(stop, io, st); stop.Err() != nil {
			break
		}
		if r.holdWhileUnleased(stop, io, st) {
			continue // paused meanwhile, perhaps, or stopped
		}
		var err error
		if len(st.redeliver) > 0 {
			err = r.redeliverOne(stop, work, io, st)
		} else {
			var msgs []*Message
			if msgs, err = r.next(io, st); err == nil {
				r.process(work, io, st, msgs)
			}
		}
		if err != nil {
			if strings.HasPrefix(err.Error(), "NOGROUP") {
				err = errors.Join(err, createGroup(io, r.rdb, r.stage.Topic, st.p, r.cfg.Group))
			}
			pause := bo.NextBackOff()
			r.tel.Logger.WarnContext(io, "stream read failed", "stage", r.stage.Name, "stream", st.stream, "error", err, "retry_in", pause)
			_ = tick.Sleep(stop, pause)
			continue
		}
		bo.Reset()
	}
	r.flushAcks(io, st)
}

// next returns the next batch of new entries, once this copy's own pending
// entries and due claims are queued for redelivery.
func (r *Runner) next(ctx context.Context, st *partitionState) ([]*Message, error) {
	if st.ownFrom != "" || !time.Now().Before(st.nextClaim) {
		r.flushAcks(ctx, st)
	}
	if err := r.requeueDue(ctx, st); err != nil {
		return nil, err
	}
	switch {
	case st.ownFrom != "": // this consumer's own pending entries, a page at a time
		next, _, err := r.queuePending(ctx, st, r.cfg.Consumer, 0, st.ownFrom)
		if err == nil {
			st.ownFrom = next
		}
		return nil, err
	case !time.Now().Before(st.nextClaim):
		if err := r.claim(ctx, st); err != nil || len(st.redeliver) > 0 {
			return nil, err
		}
	}
	return r.read(ctx, st, r.cfg.Block)
}

// process runs each message through the chain under work and settles it
// under ctx, keeping the batch fresh meanwhile (see inflight); the acks left
// go with the next read. Once work has ended the rest stay pending.
func (r *Runner) process(work, ctx context.Context, st *partitionState, msgs []*Message) {
	if len(msgs) == 0 {
		return
	}
	var counts outcomeCounts
	defer r.settled.add(&counts)
	f := r.keep(ctx, st, msgs)
	defer func() { st.acks.addAll(f.end(ctx)) }()
	live := make([]*Message, 0, len(msgs))
	for _, m := range msgs {
		m.reuse = &st.traces
		switch group, _ := retryFor(m); {
		case m.deleted:
			f.settled(m.ID, ackDeleted) // entry deleted from the stream: nothing to handle
		case group != "" && group != r.cfg.Group:
			f.settled(m.ID, ackSkipped) // another group's delayed retry
		default:
			live = append(live, m)
		}
	}
	if r.batch != nil {
		mine := slices.DeleteFunc(live, func(m *Message) bool { return !f.take(m.ID) })
		if len(mine) == 0 || work.Err() != nil { // an empty read is no batch: no span, no handler call
			return
		}
		f.started(mine[0].ID)
		for i, err := range r.batch.handle(work, mine, f.take) {
			r.settle(ctx, st, f, &counts, mine[i], err)
		}
		return
	}
	for _, m := range live {
		if work.Err() != nil {
			return // stopped: the rest stay pending
		}
		if !f.take(m.ID) {
			continue // another copy took it over and handles it
		}
		f.started(m.ID)
		r.settle(ctx, st, f, &counts, m, r.handler(work, m))
	}
}

// settle settles a handled message by its handler's error.
func (r *Runner) settle(ctx context.Context, st *partitionState, f *inflight, counts *outcomeCounts, m *Message, err error) {
	outcome := Classify(err)
	counts.count(outcome)
	switch outcome {
	case OutcomeAcked:
		f.settled(m.ID, ackHandled)
	case OutcomeDropped:
		f.settled(m.ID, ackDropped)
	case OutcomeDelayed:
		f.settled(m.ID, ackNone)
		delay, _ := RetryDelay(err)
		r.park(ctx, st, m, delay)
	case OutcomeDeadLettered:
		f.settled(m.ID, ackNone)
		if dlqErr := r.moveToDeadLetter(ctx, st.p, m, err); dlqErr != nil {
			r.tel.Logger.ErrorContext(ctx, "dead-letter move failed; message stays pending",
				"stage", r.stage.Name, "id", m.ID, "error", dlqErr)
		}
	default:
		f.settled(m.ID, ackNone) // left pending: it goes stale and is redelivered
	}
}

// flushAcks acknowledges the queued acks now.
func (r *Runner) flushAcks(ctx context.Context, st *partitionState) {
	if st.acks.len() == 0 {
		return
	}
	r.ackFailed(ctx, st.stream, &st.acks, r.ack(ctx, st.p, &st.acks))
}

// ackFailed logs a failed XACK and forgets a: the messages stay pending and
// are delivered again, which is what at-least-once allows.
func (r *Runner) ackFailed(ctx context.Context, stream string, a *ackSet, err error) {
	if err != nil {
		r.tel.Logger.WarnContext(ctx, "ack failed; messages will be redelivered", "stage", r.stage.Name,
			"stream", stream, "count", a.len(), "error", err)
	}
	a.clear()
}

// EnsureGroups creates group on every partition of topic if it is missing,
// reading from the stream's start, so a backlog published before the stage
// runs waits for it (the Trimmer keeps what the group has not acknowledged).
func EnsureGroups(ctx context.Context, rdb redis.UniversalClient, topic Topic, group string) error {
	for p := 0; p < topic.Partitions; p++ {
		if err := createGroup(ctx, rdb, topic, p, group); err != nil {
			return err
		}
	}
	return nil
}

// RunStages runs copies of each stage with tel until stop, which cancels
// them and waits; a stage that fails is logged on tel.Logger if set.
func RunStages(ctx context.Context, rdb redis.UniversalClient, tel Telemetry, copies int, stages ...Stage) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	stop = sync.OnceFunc(func() { cancel(); wg.Wait() })
	for _, s := range stages {
		for range copies {
			r, err := NewRunner(rdb, s, tel)
			if err != nil {
				stop()
				return nil, err
			}
			wg.Go(func() {
				if err := r.Run(ctx); err != nil && tel.Logger != nil {
					tel.Logger.Error("bench: stage failed", "stage", s.Name, "error", err)
				}
			})
		}
	}
	return stop, nil
}
