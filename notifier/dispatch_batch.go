package notifier

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/internal/script"
	"github.com/dropstream/dropstream/internal/tick"
	"github.com/dropstream/dropstream/notifier/digest"
	"github.com/dropstream/dropstream/notifier/history"
	"github.com/dropstream/dropstream/stream"
)

// BatchOptions tune DeliverBatch.
type BatchOptions struct {
	// Before runs once for the claimed deliveries idx and returns per index
	// nil or a hook their send runs first; its error fails it retryably.
	Before func(ctx context.Context, idx []int) []func(context.Context) error
	// Concurrency bounds the sends of this batch in flight. Default 1.
	Concurrency int
	// Slots bounds the sends in flight across the batches sharing it.
	Slots chan struct{}
	// History receives each delivery's records: a sent one's with its
	// ledger record (a crash keeps both or neither), one decided without a
	// send before the sends.
	History *history.Recorder
	Record  func(i int, outcome string, err error) []history.Record
}

// DeliverBatch is Deliver for each of dels in a constant number of round
// trips, returning outcomes and errors by index; a repeated key is claimed
// once.
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
			d.in.notifications.Add(context.Background(), 1, d.attrs.get(del.Notification.Flow, del.Channel, outcomes[i], errType).add...)
		}
		span.End()
	}
	return outcomes, errs
}

// deliverBatch fills each outcome, error and error type ("": not counted).
func (d *Dispatcher) deliverBatch(ctx context.Context, dels []Delivery, ctxs []context.Context, opts BatchOptions,
	outcomes, errTypes []string, errs []error) {
	fail := func(i int, typ string, err error) { outcomes[i], errTypes[i], errs[i] = OutcomeFailed, typ, err }
	keys := make([]string, 0, len(dels))
	recs := make([]DeliveryRecord, 0, len(dels))
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
		recs = append(recs, DeliveryRecord{Flow: n.Flow, Channel: del.Channel, RecipientID: n.Recipient.ID, EventID: n.EventID,
			SessionID: n.SessionID, Subject: n.Subject, TraceID: n.TraceID, MessageID: del.MessageID, Attempt: del.Attempt})
		idx = append(idx, i)
		resume = append(resume, del.Redelivered)
	}
	results, cerrs := d.ledger.claimAll(ctx, keys, recs, resume)
	var held []int             // positions in keys whose lease this call holds
	var resumed map[string]int // by flow
	for j, i := range idx {
		del := dels[i]
		switch res := results[j]; {
		case cerrs[j] != nil:
			fail(i, errorRetryable, unsent(ctx, cerrs[j]))
		case res == claimSent:
			outcomes[i] = OutcomeDuplicate
		case res == claimBusy:
			fail(i, errorInFlight, fmt.Errorf("%w: %s", ErrInFlight, keys[j]))
		case res == claimRejected:
			fail(i, "", stream.Permanent(fmt.Errorf("notifier: %s refused %s earlier for message %s", del.Channel,
				del.Notification.Recipient.ID, del.MessageID)))
		case res == claimResumed:
			if resumed == nil {
				resumed = map[string]int{}
			}
			resumed[del.Notification.Flow]++
			d.in.resumed.Add(context.Background(), 1, d.attrs.get(del.Notification.Flow, del.Channel, "", "").add...)
			held = append(held, j)
		case res != claimed:
			fail(i, errorRetryable, fmt.Errorf("notifier: claim %s: unexpected answer %q", keys[j], res))
		default:
			held = append(held, j)
		}
	}
	for flow, n := range resumed {
		d.logResumed(flow, n)
	}
	if opts.History != nil && opts.Record != nil {
		claimed := make([]bool, len(dels))
		for _, j := range held {
			claimed[idx[j]] = true
		}
		var recs []history.Record
		for i := range dels {
			if !claimed[i] {
				recs = append(recs, opts.Record(i, outcomes[i], errs[i])...)
			}
		}
		d.record(ctx, opts.History, recs)
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
		ops[k] = settleOp{key: keys[j], rec: recs[j], kind: settleRelease}
	}
	c := &committer{d: d, ctx: ctx, opts: opts, ops: ops, batch: make([]int, len(held)), outcomes: outcomes, errs: errs}
	for k, j := range held {
		c.batch[k] = idx[j]
	}
	// A few workers, not one goroutine per send: each keeps its grown stack.
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(max(opts.Concurrency, 1), len(held)) {
		wg.Go(func() {
			for {
				k := int(next.Add(1)) - 1
				if k >= len(held) {
					return
				}
				i := c.batch[k]
				var pre func(context.Context) error
				if before != nil {
					pre = before[k]
				}
				d.send(ctxs[i], dels[i], pre, opts.Slots, &ops[k], outcomes, errTypes, errs, i)
				c.done(k)
			}
		})
	}
	wg.Wait()
}

// committer writes each claimed delivery's records as it is done; those
// done during a write go together in the next one.
type committer struct {
	d        *Dispatcher
	ctx      context.Context
	opts     BatchOptions
	ops      []settleOp // by position among the claimed deliveries
	batch    []int      // index in the batch of each position
	outcomes []string
	errs     []error

	mu      sync.Mutex
	queued  []int // positions done, not yet written
	writing bool
}

// done queues k and writes until the queue is empty, unless another writes.
func (c *committer) done(k int) {
	c.mu.Lock()
	c.queued = append(c.queued, k)
	if c.writing {
		c.mu.Unlock()
		return
	}
	c.writing = true
	for len(c.queued) > 0 {
		ks := c.queued
		c.queued = nil
		c.mu.Unlock()
		c.write(ks)
		c.mu.Lock()
	}
	c.writing = false
	c.mu.Unlock()
}

// write records the deliveries at ks, history then ledger, even after the
// batch's context ended.
func (c *committer) write(ks []int) {
	d, opts := c.d, c.opts
	sctx, cancel := settleContext(c.ctx)
	defer cancel()
	var recs []history.Record
	ops := make([]settleOp, len(ks))
	for n, k := range ks {
		ops[n] = c.ops[k]
		if opts.History != nil && opts.Record != nil {
			i := c.batch[k]
			recs = append(recs, opts.Record(i, c.outcomes[i], c.errs[i])...)
		}
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
			// History first: no send is recorded without it after a crash.
			_, herr = pipe.Exec(sctx)
		}
	}
	q := d.ledger.queueSettles(sctx, pipe, ops)
	_, xerr := pipe.Exec(sctx)
	if len(recs) > 0 && !cluster && herr == nil && xerr != nil && !script.IsNoScript(xerr) {
		herr = xerr
	}
	if herr != nil {
		d.logger.WarnContext(c.ctx, "notifier: history not recorded", "deliveries", len(ks), "key", ops[0].key, "error", herr)
	}
	for n, err := range d.ledger.settled(sctx, q) {
		switch {
		case err == nil:
		case ops[n].kind == settleSent:
			// The lease still guards the send until it expires.
			d.logger.ErrorContext(c.ctx, "notifier: delivery sent but not recorded", "key", ops[n].key, "error", err)
		default:
			// The lease expires by itself; a retry meanwhile finds it in flight.
			d.logger.WarnContext(c.ctx, "notifier: delivery not settled", "key", ops[n].key, "error", err)
		}
	}
}

// send runs a claimed delivery's hook and send (holding a slot) and sets
// how its record is settled.
func (d *Dispatcher) send(ctx context.Context, del Delivery, pre func(context.Context) error, slots chan struct{}, op *settleOp,
	outcomes, errTypes []string, errs []error, i int) {
	n := del.Notification
	if pre != nil {
		if err := pre(ctx); err != nil {
			outcomes[i], errTypes[i], errs[i] = OutcomeFailed, errorRetryable, unsent(ctx, err)
			return
		}
	}
	if slots != nil {
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
		case <-ctx.Done():
			outcomes[i], errTypes[i], errs[i] = OutcomeFailed, errorRetryable, unsent(ctx, fmt.Errorf("notifier: waiting to send: %w", ctx.Err()))
			return
		}
	}
	if err := ctx.Err(); err != nil { // a send begun now could only time out
		outcomes[i], errTypes[i], errs[i] = OutcomeFailed, errorRetryable, unsent(ctx, fmt.Errorf("notifier: %s to %s: %w", del.Channel, n.Recipient.ID, err))
		return
	}
	start := time.Now()
	sendErr := d.channels[del.Channel].Send(ctx, n)
	took := time.Since(start).Seconds()
	if sendErr == nil {
		d.in.duration.Record(context.Background(), took, d.attrs.get(n.Flow, del.Channel, OutcomeSent, "").rec...)
		if !n.ObservedAt.IsZero() {
			d.in.e2e.Record(context.Background(), max(0, time.Since(n.ObservedAt).Seconds()), d.attrs.get(n.Flow, "", "", "").rec...)
		}
		op.kind, outcomes[i] = settleSent, OutcomeSent
		return
	}
	d.in.duration.Record(context.Background(), took, d.attrs.get(n.Flow, del.Channel, OutcomeFailed, "").rec...)
	outcomes[i] = OutcomeFailed
	if stream.IsPermanent(sendErr) {
		op.kind, op.reason = settleReject, sendErr
		errTypes[i], errs[i] = errorPermanent, fmt.Errorf("notifier: %s to %s: %w", del.Channel, n.Recipient.ID, sendErr)
		return
	}
	errTypes[i], errs[i] = errorRetryable, fmt.Errorf("notifier: %s to %s: %w", del.Channel, n.Recipient.ID, sendErr)
}

// unsentError is a delivery's failure before its send, its context ended:
// no receiver was tried, so it uses up no attempt.
type unsentError struct{ err error }

func (e *unsentError) Error() string { return "notifier: not sent in time: " + e.err.Error() }
func (e *unsentError) Unwrap() error { return e.err }

// unsent marks a retryable err as unsent once ctx has ended.
func unsent(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil || stream.IsPermanent(err) || untried(err) {
		return err
	}
	return &unsentError{err: err}
}

// DigestService names the digest flusher among the binary's services.
const DigestService = "notifier-digests"

// maxDigestItems bounds a digest; the rest are later dropped as duplicates,
// so the bound is generous.
const maxDigestItems = 500

// DigestItem is one notification inside a digest's payload.
type DigestItem struct {
	Flow       string          `json:"flow"`
	Event      string          `json:"event"`
	Subject    string          `json:"subject"`
	Title      string          `json:"title,omitempty"`
	Text       string          `json:"text,omitempty"`
	Payload    json.RawMessage `json:"payload,omitempty"`
	ObservedAt time.Time       `json:"observed_at,omitzero"`
}

// DigestPayload is the payload of a digest request.
type DigestPayload struct {
	Window string       `json:"window"`
	Items  []DigestItem `json:"items"`
}

// FlushDigests publishes each due window as one critical digest request,
// then forgets its items, and returns how many. A window published twice
// is delivered once (keyed by subscriber, destination, window).
func (d *Deliverer) FlushDigests(ctx context.Context) (int, error) {
	now := d.cfg.Now()
	published := 0
	for p := 0; p < d.topic.Partitions; p++ {
		batches, err := d.digests.Due(ctx, d.topic.HashTag(p), now, 100)
		if err != nil {
			return published, err
		}
		for _, b := range batches {
			req, ok := digestRequest(b)
			if ok {
				if err := PublishRequests(ctx, d.pub, d.topic, req); err != nil {
					return published, fmt.Errorf("notifier: publish digest %s: %w", b.Window, err)
				}
				published++
			}
			if err := d.digests.Done(ctx, b); err != nil {
				return published, err
			}
		}
	}
	return published, nil
}

// digestRequest builds a batch's digest; false without a decodable item.
func digestRequest(b digest.Batch) (Request, bool) {
	sub, dest, _ := strings.Cut(b.Batch, "|")
	pl := DigestPayload{Window: b.Window}
	var first time.Time
	var titles []string
	for i, raw := range b.Items {
		if i == maxDigestItems {
			break
		}
		var r Request
		if json.Unmarshal(raw, &r) != nil {
			continue
		}
		pl.Items = append(pl.Items, DigestItem{Flow: r.Flow, Event: r.Event, Subject: r.Subject, Title: r.Title, Text: r.Text,
			Payload: r.Payload, ObservedAt: r.ObservedAt})
		if !r.ObservedAt.IsZero() && (first.IsZero() || r.ObservedAt.Before(first)) {
			first = r.ObservedAt
		}
		t := cmp.Or(r.Title, r.Subject)
		if len(titles) < 20 {
			titles = append(titles, "- "+t)
		}
	}
	if len(pl.Items) == 0 {
		return Request{}, false
	}
	body, err := json.Marshal(pl)
	if err != nil {
		return Request{}, false
	}
	text := strings.Join(titles, "\n")
	if len(text) > MaxTextLen {
		text = strings.ToValidUTF8(text[:MaxTextLen], "")
	}
	return Request{Flow: "digest", Event: "digest", Subject: "digest", SubscriberID: sub, DestinationID: dest, Window: b.Window,
		Critical: true, Digest: true, Title: strconv.Itoa(len(pl.Items)) + " notifications", Text: text, Payload: body, ObservedAt: first}, true
}

// RunDigests flushes due digests every DigestInterval until ctx ends.
func (d *Deliverer) RunDigests(ctx context.Context) error {
	tick.Every(ctx, d.cfg.DigestInterval, func() {
		if n, err := d.FlushDigests(ctx); err != nil && ctx.Err() == nil {
			d.logger.WarnContext(ctx, "notifier: digest flush failed", "error", err)
		} else if n > 0 {
			d.logger.InfoContext(ctx, "notifier: digests published", "count", n)
		}
	})
	return nil
}
