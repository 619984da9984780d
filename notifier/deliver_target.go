package notifier

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	gojson "github.com/goccy/go-json"
	lru "github.com/hashicorp/golang-lru/v2"
	"go.opentelemetry.io/otel/trace"

	"github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/internal/tick"
	"github.com/dropstream/dropstream/notifier/digest"
	"github.com/dropstream/dropstream/notifier/history"
	"github.com/dropstream/dropstream/notifier/subscriber"
	"github.com/dropstream/dropstream/notifier/throttle"
	"github.com/dropstream/dropstream/stream"
)

// job is one request to one target.
type job struct {
	msg     int // index of the message in the batch
	t       target
	key     string // business key
	channel string
	rec     history.Record
	err     error
}

// deliverAll suppresses, holds or sends (throttled) each target of the
// requests without error, in a constant number of round trips; it sets
// errs and returns the history records left to write.
func (d *Deliverer) deliverAll(ctx context.Context, msgs []*stream.Message, reqs []Request, errs []error) []history.Record {
	subs, err := d.resolveAll(ctx, reqs, errs)
	if err != nil {
		err = unsent(ctx, err)
		for i := range errs {
			if errs[i] == nil && reqs[i].Destination == nil {
				errs[i] = err
			}
		}
	}
	recs := make([]history.Record, 0, len(msgs))
	var holds, sends []*job
	jobs := make([]*job, 0, len(msgs))
	slab := make([]job, 0, len(msgs)) // the jobs, but past it
	var ts []target
	for i, m := range msgs {
		if errs[i] != nil {
			continue
		}
		r := &reqs[i]
		ts = d.targets(ctx, r, subs, ts[:0])
		for _, t := range ts {
			key := requestKey(*r, t.subscriberID, t.dest.ID)
			if len(slab) == cap(slab) {
				slab = make([]job, 0, len(msgs))
			}
			slab = append(slab, job{msg: i, t: t, key: key, channel: t.dest.Channel(),
				rec: history.Record{ID: NotificationID(key), Flow: r.Flow, Event: r.Event, SubscriberID: t.subscriberID,
					DestinationID: t.dest.ID, Channel: t.dest.Channel(), Subject: r.Subject, Window: r.Window, Attempts: attemptOf(m),
					Critical: r.Critical, ObservedAt: r.ObservedAt, TraceID: r.TraceID, EventID: r.EventID, RunID: r.RunID, MessageID: m.ID}})
			j := &slab[len(slab)-1]
			jobs = append(jobs, j)
			switch {
			case t.inline:
				sends = append(sends, j)
			case t.dest.Status != subscriber.StatusActive || !t.prefs.ChannelOn(j.channel) || (!r.Digest && !t.prefs.Wants(r.Subject)):
				recs = append(recs, d.finish(j.rec, history.StatusSuppressed, nil))
			case !r.Critical && !r.Digest:
				holds = append(holds, j)
			default:
				sends = append(sends, j)
			}
		}
	}
	recs = d.holdAll(ctx, msgs, reqs, holds, &sends, recs)
	recs = d.sendAll(ctx, msgs, reqs, sends, recs)
	// A message's jobs are contiguous in jobs: one slice holds all errors.
	jerrs := make([]error, len(jobs))
	for k, j := range jobs {
		jerrs[k] = j.err
	}
	k := 0
	for i := range msgs {
		from := k
		for k < len(jobs) && jobs[k].msg == i {
			k++
		}
		if errs[i] == nil {
			errs[i] = Settle(jerrs[from:k:k])
		}
	}
	return recs
}

// holdAll files holds and digests, appends those to send now to sends and
// returns recs with the others' records.
func (d *Deliverer) holdAll(ctx context.Context, msgs []*stream.Message, reqs []Request, holds []*job, sends *[]*job,
	recs []history.Record) []history.Record {
	status := make([]string, len(holds))
	sem := make(chan struct{}, d.cfg.Concurrency)
	var wg sync.WaitGroup
	for k, j := range holds {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			m := msgs[j.msg]
			status[k], j.err = d.hold(ctx, m, reqs[j.msg], j.t, j.key, d.tag(m.Partition))
			j.err = unsent(ctx, j.err)
		})
	}
	wg.Wait()
	for k, j := range holds {
		switch {
		case j.err != nil:
		case status[k] == "":
			*sends = append(*sends, j)
		default:
			recs = append(recs, d.finish(j.rec, status[k], nil))
		}
	}
	return recs
}

// sendAll sends the jobs in one batch, which records their history, and
// returns recs with the records of those not rendered.
func (d *Deliverer) sendAll(ctx context.Context, msgs []*stream.Message, reqs []Request, sends []*job, recs []history.Record) []history.Record {
	if len(sends) == 0 {
		return recs
	}
	dels := make([]Delivery, 0, len(sends))
	live := make([]*job, 0, len(sends))
	for _, j := range sends {
		m, r := msgs[j.msg], &reqs[j.msg]
		unsub := d.unsubscribeURL(j.t.dest)
		body, err := render(r, j.t, j.rec.ID, unsub)
		if err != nil {
			j.err = stream.Permanent(err)
			recs = append(recs, d.finish(j.rec, history.StatusRejected, j.err))
			continue
		}
		live = append(live, j)
		dels = append(dels, Delivery{HashTag: d.tag(m.Partition), Key: j.key, Channel: j.channel, MessageID: m.ID,
			Attempt: attemptOf(m), Redelivered: m.Attempt > 1, parent: trace.SpanContextFromContext(m.Context()),
			Notification: Notification{Flow: r.Flow, Event: r.Event,
				Recipient: Recipient{ID: j.t.subscriberID, Address: j.t.dest.Address, Secret: j.t.dest.Secret},
				EventID:   j.rec.ID, Subject: r.Subject, TraceID: r.TraceID, ObservedAt: r.ObservedAt, Body: body,
				Title: r.Title, Text: r.Text, HTML: r.HTML, UnsubscribeURL: unsub}})
	}
	opts := BatchOptions{Concurrency: d.cfg.Concurrency, Slots: d.slots, History: d.history}
	opts.Record = func(k int, outcome string, err error) []history.Record {
		if outcome == OutcomeDuplicate || untried(err) {
			return nil // recorded when it was sent, or by the copy sending it, or when tried
		}
		return []history.Record{d.finish(live[k].rec, d.sendStatus(err, live[k].rec.Attempts), err)}
	}
	if d.throttle != nil {
		opts.Before = func(ctx context.Context, idx []int) []func(context.Context) error {
			asks := make([]throttle.Ask, len(idx))
			for k, i := range idx {
				asks[k] = throttle.Ask{Dest: d.tkeys.get(live[i].t.dest), Channel: live[i].channel}
			}
			return ThrottleHooks(ctx, d.throttle, asks, d.cfg.MaxThrottleWait)
		}
	}
	_, errs := d.dispatch.DeliverBatch(ctx, dels, opts)
	for k, j := range live {
		j.err = errs[k]
		var de *DeliveryError
		if errors.As(j.err, &de) && de.RetryAfter > 0 && d.throttle != nil {
			d.keepRetryAfter(ctx, j.t.dest, de.RetryAfter)
		}
	}
	return recs
}

// keepRetryAfter blocks dest for a receiver's Retry-After, even if ctx
// ended while the receiver answered.
func (d *Deliverer) keepRetryAfter(ctx context.Context, dest subscriber.Destination, after time.Duration) {
	sctx, cancel := settleContext(ctx)
	defer cancel()
	if err := d.throttle.Block(sctx, d.tkeys.get(dest), d.cfg.Now().Add(after)); err != nil {
		d.logger.WarnContext(ctx, "notifier: retry-after not recorded", "error", err)
	}
}

// sendStatus is a send's history status: sent, rejected or failed.
func (d *Deliverer) sendStatus(err error, attempt int) string {
	switch {
	case err == nil:
		return history.StatusSent
	case stream.IsPermanent(err) || attempt >= d.cfg.Retry.MaxAttempts:
		return history.StatusRejected
	}
	return history.StatusFailed
}

// ThrottleHooks takes the permissions of asks from th in one round trip
// and returns, per ask, nil or a hook (for BatchOptions.Before) waiting
// for it; a wait past maxWait fails with ErrThrottled.
func ThrottleHooks(ctx context.Context, th *throttle.Throttle, asks []throttle.Ask, maxWait time.Duration) []func(context.Context) error {
	waits, errs := th.TakeMany(ctx, asks)
	out := make([]func(context.Context) error, len(asks))
	for k, a := range asks {
		switch {
		case errs[k] != nil:
			out[k] = func(context.Context) error { return errs[k] }
		case waits[k] > 0:
			out[k] = func(ctx context.Context) error { return waitThrottle(ctx, th, a.Dest, a.Channel, waits[k], maxWait) }
		}
	}
	return out
}

// hold files a non-critical request in a window; "" means send now.
func (d *Deliverer) hold(ctx context.Context, m *stream.Message, r Request, t target, key, tag string) (string, error) {
	at := m.PublishedAt()
	if at.IsZero() {
		at = d.cfg.Now()
	}
	batch := t.subscriberID + "|" + t.dest.ID
	item, err := json.Marshal(r)
	if err != nil {
		return "", stream.Permanent(fmt.Errorf("notifier: encode digest item: %w", err))
	}
	if quiet, end := t.prefs.QuietHours.Quiet(at, t.loc); quiet {
		w := digest.Window{ID: "quiet:" + end.UTC().Format("2006-01-02T15:04Z"), End: end}
		return history.StatusHeld, d.digests.AddTimed(ctx, tag, batch, key, item, w)
	}
	p := t.prefs.Digest
	switch {
	case !p.Batches():
		return "", nil
	case p.Mode == digest.ModeEvery:
		_, err := d.digests.AddCounted(ctx, tag, batch, key, item, p, d.cfg.Now())
		return history.StatusBatched, err
	}
	w, err := p.TimeWindow(at, t.loc)
	if err != nil {
		return "", stream.Permanent(err)
	}
	return history.StatusBatched, d.digests.AddTimed(ctx, tag, batch, key, item, w)
}

// waitThrottle waits and asks th again until permitted, up to maxWait.
func waitThrottle(ctx context.Context, th *throttle.Throttle, dest, channel string, wait, maxWait time.Duration) error {
	deadline := time.Now().Add(maxWait)
	for wait > 0 {
		if time.Now().Add(wait).After(deadline) {
			return &throttledError{dest: dest, channel: channel, wait: wait}
		}
		err := tick.Sleep(ctx, wait)
		if err == nil {
			wait, err = th.Take(ctx, dest, channel)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// throttledError is ErrThrottled with the wait asked for.
type throttledError struct {
	dest, channel string
	wait          time.Duration
}

func (e *throttledError) Error() string {
	return fmt.Sprintf("%v: %s on %s for %s", ErrThrottled, e.dest, e.channel, e.wait)
}

func (e *throttledError) Unwrap() error { return ErrThrottled }

// finish completes a history record.
func (d *Deliverer) finish(rec history.Record, status string, cause error) history.Record {
	rec.Status, rec.At = status, time.Now().UTC()
	if status == history.StatusSent && !rec.ObservedAt.IsZero() {
		rec.LatencyMs = max(rec.At.Sub(rec.ObservedAt).Milliseconds(), 0)
	}
	if cause != nil {
		rec.Error = clip.String(cause.Error(), maxReason)
	}
	return rec
}

// Message is the JSON body a webhook receives: the flow's payload in an envelope.
type Message struct {
	ID             string          `json:"id"`
	Flow           string          `json:"flow"`
	Event          string          `json:"event"`
	Subject        string          `json:"subject"`
	SubscriberID   string          `json:"subscriber_id"`
	DestinationID  string          `json:"destination_id"`
	Window         string          `json:"window"`
	Critical       bool            `json:"critical,omitempty"`
	Digest         bool            `json:"digest,omitempty"`
	Title          string          `json:"title,omitempty"`
	Text           string          `json:"text,omitempty"`
	Payload        json.RawMessage `json:"payload,omitempty"`
	ObservedAt     time.Time       `json:"observed_at,omitzero"`
	TraceID        string          `json:"trace_id,omitempty"`
	UnsubscribeURL string          `json:"unsubscribe_url,omitempty"`
}

// render returns the webhook body of r to t, with unsubscribe link unsub.
func render(r *Request, t target, id, unsub string) ([]byte, error) {
	m := Message{ID: id, Flow: r.Flow, Event: r.Event, Subject: r.Subject, SubscriberID: t.subscriberID,
		DestinationID: t.dest.ID, Window: r.Window, Critical: r.Critical, Digest: r.Digest, Title: r.Title, Text: r.Text,
		Payload: r.Payload, ObservedAt: r.ObservedAt, TraceID: r.TraceID, UnsubscribeURL: unsub}
	body, err := gojson.Marshal(&m)
	if err != nil {
		return nil, fmt.Errorf("notifier: encode message: %w", err)
	}
	return body, nil
}

// UnsubscribePath is the API path of an unsubscribe link, before the token.
const UnsubscribePath = "/v1/unsubscribe/"

// ConfirmPath is the API path of an opt-in link, before the token.
const ConfirmPath = "/v1/confirm/"

func (d *Deliverer) unsubscribeURL(dest subscriber.Destination) string {
	if dest.UnsubscribeToken == "" {
		return ""
	}
	return d.cfg.PublicURL + UnsubscribePath + dest.UnsubscribeToken
}

// maxThrottleKeys bounds the remembered throttle keys.
const maxThrottleKeys = 4096

// throttleKeys remembers destinations' throttle keys by kind and address:
// deriving one parses the address and hashes it, about 4 % of a
// delivery's allocations (BENCHMARKS.md, "Notifier: webhooks over
// fasthttp"). Safe for concurrent use.
type throttleKeys struct {
	*lru.Cache[destAddress, string]
}

type destAddress struct{ kind, address string }

func newThrottleKeys() throttleKeys {
	c, _ := lru.New[destAddress, string](maxThrottleKeys) // fails only for a size below 1
	return throttleKeys{c}
}

// get returns a destination's throttle bucket, its core's hash (its id when
// it has no valid core); valid ones are remembered.
func (c throttleKeys) get(dest subscriber.Destination) string {
	a := destAddress{dest.Kind, dest.Address}
	if key, ok := c.Get(a); ok {
		return key
	}
	core, err := dest.Core()
	if err != nil {
		return dest.ID
	}
	key := subscriber.CoreHash(core)
	c.Add(a, key)
	return key
}
