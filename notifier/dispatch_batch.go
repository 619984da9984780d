package notifier

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/internal/script"
	"github.com/dropstream/dropstream/notifier/history"
	"github.com/dropstream/dropstream/stream"
)

// BatchOptions tune DeliverBatch.
type BatchOptions struct {
	// Before, when set, runs once for all the deliveries whose lease was
	// taken (idx are their indices in the batch) before any is sent (a
	// throttle's takes, in one round trip), and returns per index nil (send
	// now) or a function the delivery's send runs first (a wait), whose
	// error releases the lease and fails the delivery retryably, as with
	// Delivery.Before, which runs after it.
	Before func(ctx context.Context, idx []int) []func(context.Context) error
	// Concurrency bounds the sends of this batch in flight. Default 1.
	Concurrency int
	// Slots, when set, bounds the sends in flight across every batch
	// sharing it: each send holds a slot while its channel sends (not while
	// it waits for its throttle).
	Slots chan struct{}
	// History, when set, records what became of each claimed delivery in
	// the same step as its ledger record, as soon as that delivery is done
	// (not when the batch is): Record returns the records of delivery i
	// (its index in the batch) for its outcome and error. A crash then
	// keeps both or neither.
	History *history.Recorder
	Record  func(i int, outcome string, err error) []history.Record
}

// DeliverBatch delivers each of dels as Deliver does and returns their
// outcomes and errors by index, in a constant number of Redis round trips
// whatever the batch's size: one pipeline claims every business key without
// a record (SET NX), a second one (only when some key holds a record) lets
// the claim script decide on the others, each claim atomic on its own as
// in Deliver; then the sends run, up to opts.Concurrency at once (and
// within opts.Slots), and each settles its record (with its history, see
// BatchOptions.History) in one round trip as soon as it is done: a crash
// mid-batch leaves only the sends truly in flight unrecorded.
// Keys repeated in one batch are claimed once: the later ones find the
// first's lease (ErrInFlight) or its record.
func (d *Dispatcher) DeliverBatch(ctx context.Context, dels []Delivery, opts BatchOptions) ([]string, []error) {
	n := len(dels)
	outcomes := make([]string, n)
	errs := make([]error, n)
	errTypes := make([]string, n)
	ctxs := make([]context.Context, n)
	spans := make([]trace.Span, n)
	for i, del := range dels {
		nt := del.Notification
		parent := ctx
		if del.parent.IsValid() {
			parent = trace.ContextWithSpanContext(ctx, del.parent)
		}
		ctxs[i], spans[i] = d.tracer.Start(parent, d.spanName(del.Channel), trace.WithAttributes(
			attribute.String("dropstream.notifier.flow", nt.Flow), attribute.String("dropstream.notifier.channel", del.Channel),
			attribute.String("dropstream.notifier.recipient_id", nt.Recipient.ID), attribute.String("dropstream.notifier.event_id", nt.EventID),
			attribute.String("dropstream.notifier.session_id", nt.SessionID)))
	}
	d.deliverBatch(ctx, dels, ctxs, opts, outcomes, errTypes, errs)
	for i, del := range dels {
		span := spans[i]
		span.SetAttributes(attribute.String("dropstream.notifier.outcome", outcomes[i]))
		errType := ""
		if err := errs[i]; err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
			errType = errTypes[i]
		}
		if errTypes[i] != "" || outcomes[i] != OutcomeFailed {
			d.in.notifications.Add(context.Background(), 1, d.attrs.get(del.Notification.Flow, del.Channel, outcomes[i], errType))
		}
		span.End()
	}
	return outcomes, errs
}

// deliverBatch fills each delivery's outcome, error and error type ("" when
// a failure must not be counted again).
func (d *Dispatcher) deliverBatch(ctx context.Context, dels []Delivery, ctxs []context.Context, opts BatchOptions,
	outcomes, errTypes []string, errs []error) {
	fail := func(i int, typ string, err error) { outcomes[i], errTypes[i], errs[i] = OutcomeFailed, typ, err }
	keys := make([]string, 0, len(dels))
	recs := make([]*DeliveryRecord, 0, len(dels))
	var idx []int
	var resume []bool
	seen := make(map[string]bool, len(dels))
	for i, del := range dels {
		n := del.Notification
		if del.Key == "" || len(del.Key) > 256 {
			fail(i, errorPermanent, stream.Permanentf("notifier: business key of %d bytes: want 1..256", len(del.Key)))
			continue
		}
		if _, ok := d.channels[del.Channel]; !ok {
			fail(i, errorPermanent, stream.Permanent(fmt.Errorf("%w %q", ErrUnknownChannel, clip.Marked(del.Channel, maxQuoted))))
			continue
		}
		key := d.ledger.Key(del.HashTag, del.Key)
		if seen[key] {
			fail(i, errorInFlight, fmt.Errorf("%w: %s (twice in one batch)", ErrInFlight, key))
			continue
		}
		seen[key] = true
		keys = append(keys, key)
		recs = append(recs, &DeliveryRecord{Flow: n.Flow, Channel: del.Channel, RecipientID: n.Recipient.ID, EventID: n.EventID,
			SessionID: n.SessionID, Subject: n.Subject, TraceID: n.TraceID, MessageID: del.MessageID, Attempt: del.Attempt})
		idx = append(idx, i)
		resume = append(resume, del.Redelivered)
	}
	results, cerrs := d.ledger.claimAll(ctx, keys, recs, resume)
	var held []int // positions in keys whose lease this call holds
	resumed := 0
	for j, i := range idx {
		del := dels[i]
		switch res := results[j]; {
		case cerrs[j] != nil:
			fail(i, errorRetryable, cerrs[j])
		case res == claimSent:
			outcomes[i] = OutcomeDuplicate
		case res == claimBusy:
			fail(i, errorInFlight, fmt.Errorf("%w: %s", ErrInFlight, keys[j]))
		case res == claimRejected:
			fail(i, "", stream.Permanent(fmt.Errorf("notifier: %s refused %s earlier for message %s", del.Channel,
				del.Notification.Recipient.ID, del.MessageID)))
		case res == claimResumed:
			resumed++
			d.in.resumed.Add(context.Background(), 1, d.attrs.flowChannel(del.Notification.Flow, del.Channel))
			held = append(held, j)
		case res != claimed:
			fail(i, errorRetryable, fmt.Errorf("notifier: claim %s: unexpected answer %q", keys[j], res))
		default:
			held = append(held, j)
		}
	}
	if resumed > 0 {
		d.logResumed(ctx, resumed)
	}
	if len(held) == 0 {
		return
	}
	var before []func(context.Context) error
	if opts.Before != nil {
		bi := make([]int, len(held))
		for k, j := range held {
			bi[k] = idx[j]
		}
		before = opts.Before(ctx, bi)
	}
	ops := make([]settleOp, len(held))
	for k, j := range held {
		ops[k] = settleOp{key: keys[j], rec: *recs[j], kind: settleRelease}
	}
	// A few workers rather than a goroutine per send: each keeps the stack
	// the HTTP client grew.
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(max(opts.Concurrency, 1), len(held)) {
		wg.Go(func() {
			for {
				k := int(next.Add(1)) - 1
				if k >= len(held) {
					return
				}
				i := idx[held[k]]
				var pre func(context.Context) error
				if before != nil {
					pre = before[k]
				}
				d.send(ctxs[i], dels[i], pre, opts.Slots, &ops[k], outcomes, errTypes, errs, i)
				d.settle(ctx, &ops[k], opts, i, outcomes[i], errs[i])
			}
		})
	}
	wg.Wait()
}

// settle records what became of one claimed delivery (index i of the
// batch) in one round trip: its history records first, then its ledger
// record, in one transaction on one Redis server (on a cluster the history
// goes first, in a round trip of its own). It runs even when ctx has
// ended: the send happened.
func (d *Dispatcher) settle(ctx context.Context, op *settleOp, opts BatchOptions, i int, outcome string, err error) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	var recs []history.Record
	if opts.History != nil && opts.Record != nil {
		recs = opts.Record(i, outcome, err)
	}
	rdb := d.ledger.rdb
	_, cluster := rdb.(*redis.ClusterClient)
	var pipe redis.Pipeliner
	if cluster {
		pipe = rdb.Pipeline()
	} else {
		pipe = rdb.TxPipeline()
	}
	var herr error
	if len(recs) > 0 {
		if herr = opts.History.Queue(sctx, pipe, recs...); herr == nil && cluster {
			// The history is on other nodes than the ledger: it is written
			// first, so a crash never leaves a send recorded without it.
			_, herr = pipe.Exec(sctx)
		}
	}
	q := d.ledger.queueSettles(sctx, pipe, []settleOp{*op})
	_, xerr := pipe.Exec(sctx)
	if len(recs) > 0 && !cluster && herr == nil && xerr != nil && !script.IsNoScript(xerr) {
		herr = xerr
	}
	if herr != nil {
		d.logger.WarnContext(ctx, "notifier: history not recorded", "key", op.key, "error", herr)
	}
	if err := d.ledger.settled(sctx, q)[0]; err != nil {
		switch op.kind {
		case settleSent:
			// Sent but not recorded: the lease still guards it until it
			// expires; only a redelivery after that could send it again.
			d.logger.ErrorContext(ctx, "notifier: delivery sent but not recorded", "key", op.key, "error", err)
		default:
			// The lease expires by itself; a retry meanwhile finds it in flight.
			d.logger.WarnContext(ctx, "notifier: delivery not settled", "key", op.key, "error", err)
		}
	}
}

// logResumed logs, once per episode (a minute without one), that sends a
// stopped delivery left in flight are being sent again.
func (d *Dispatcher) logResumed(ctx context.Context, n int) {
	now := time.Now().UnixNano()
	last := d.resumedLog.Load()
	if now-last < int64(time.Minute) || !d.resumedLog.CompareAndSwap(last, now) {
		return
	}
	d.logger.WarnContext(ctx, "notifier: resending deliveries a stopped copy left in flight; their receivers may get them twice, "+
		"with the same webhook-id (counted in "+MetricResumed+")", "deliveries", n)
}

// send runs one claimed delivery's pre and Before hooks and, holding one
// of slots (when set), its send, and sets how its record is settled.
func (d *Dispatcher) send(ctx context.Context, del Delivery, pre func(context.Context) error, slots chan struct{}, op *settleOp,
	outcomes, errTypes []string, errs []error, i int) {
	n := del.Notification
	for _, hook := range []func(context.Context) error{pre, del.Before} {
		if hook == nil {
			continue
		}
		if err := hook(ctx); err != nil {
			outcomes[i], errTypes[i], errs[i] = OutcomeFailed, errorRetryable, err
			return
		}
	}
	if slots != nil {
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
		case <-ctx.Done():
			outcomes[i], errTypes[i], errs[i] = OutcomeFailed, errorRetryable, fmt.Errorf("notifier: waiting to send: %w", ctx.Err())
			return
		}
	}
	start := time.Now()
	sendErr := d.channels[del.Channel].Send(ctx, n)
	took := time.Since(start).Seconds()
	if sendErr == nil {
		d.in.duration.Record(context.Background(), took, d.attrs.get(n.Flow, del.Channel, OutcomeSent, ""))
		if !n.ObservedAt.IsZero() {
			d.in.e2e.Record(context.Background(), max(0, time.Since(n.ObservedAt).Seconds()), d.attrs.flow(n.Flow))
		}
		op.kind, outcomes[i] = settleSent, OutcomeSent
		return
	}
	d.in.duration.Record(context.Background(), took, d.attrs.get(n.Flow, del.Channel, OutcomeFailed, ""))
	outcomes[i] = OutcomeFailed
	if stream.IsPermanent(sendErr) {
		op.kind, op.reason = settleReject, sendErr
		errTypes[i], errs[i] = errorPermanent, fmt.Errorf("notifier: %s to %s: %w", del.Channel, n.Recipient.ID, sendErr)
		return
	}
	errTypes[i], errs[i] = errorRetryable, fmt.Errorf("notifier: %s to %s: %w", del.Channel, n.Recipient.ID, sendErr)
}
