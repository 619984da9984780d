package notifier

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	gotel "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/notifier/history"
	dsotel "github.com/dropstream/dropstream/otel"
	"github.com/dropstream/dropstream/stream"
)

// Errors of Deliver, for errors.Is.
var (
	// ErrInFlight: another copy holds the delivery's lease; retry later.
	ErrInFlight = errors.New("notifier: delivery in flight elsewhere")
	// ErrUnknownChannel: no channel of that name is configured. Permanent.
	ErrUnknownChannel = errors.New("notifier: unknown channel")
)

// settleTimeout bounds the ledger write after a send, even past the handler's context.
const settleTimeout = 5 * time.Second

// settleContext is ctx without its end, bounded by settleTimeout: an
// outcome once decided is written even if the handler's time ran out.
func settleContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
}

// Delivery asks a Dispatcher to deliver one notification once.
type Delivery struct {
	// HashTag places the ledger record in the message's partition's slot.
	HashTag string
	// Key is the business key, sent at most once while its record lives. 1..256 bytes.
	Key string
	// Channel names the channel to send on.
	Channel string
	// MessageID and Attempt name the stream message asking for it.
	MessageID string
	Attempt   int
	// Notification is what to send.
	Notification Notification
	// Redelivered takes back at once a lease the message left.
	Redelivered bool
	// parent is the trace the send continues; the context's when invalid.
	parent trace.SpanContext
}

// Dispatcher sends each business key once via the ledger; concurrency-safe.
type Dispatcher struct {
	ledger   *DeliveryLedger
	channels map[string]Channel
	spans    map[string]string // channel → span name
	in       *instruments
	attrs    outcomeAttrs
	tracer   trace.Tracer
	logger   *slog.Logger
	// resumed gathers the resent sends of an episode, to log it once.
	resumed resumeEpisode
}

// NewDispatcher returns a dispatcher over channels by Name; nil fields of
// tel take the OpenTelemetry globals and slog.Default.
func NewDispatcher(ledger *DeliveryLedger, channels map[string]Channel, tel stream.Telemetry) (*Dispatcher, error) {
	if ledger == nil || len(channels) == 0 {
		return nil, errors.New("notifier: dispatcher needs a ledger and at least one channel")
	}
	chans := make(map[string]Channel, len(channels))
	spans := make(map[string]string, len(channels))
	for name, c := range channels {
		if c == nil || c.Name() != name {
			return nil, fmt.Errorf("notifier: channel %q is nil or names itself otherwise", name)
		}
		chans[name], spans[name] = c, "notify "+name
	}
	in, err := newInstruments(tel.MeterProvider)
	if err != nil {
		return nil, err
	}
	tp := cmp.Or(tel.TracerProvider, gotel.GetTracerProvider())
	logger := cmp.Or(tel.Logger, slog.Default())
	return &Dispatcher{ledger: ledger, channels: chans, spans: spans, in: in, tracer: tp.Tracer(instrumentationScope), logger: logger}, nil
}

// spanName is the name of a send's span, "notify <channel>".
func (d *Dispatcher) spanName(channel string) string {
	if name, ok := d.spans[channel]; ok {
		return name
	}
	return "notify " + channel
}

// Deliver sends the notification unless its business key is recorded, and
// returns the outcome:
//
//   - OutcomeSent, nil: sent now and recorded;
//   - OutcomeDuplicate, nil: already sent, nothing done;
//   - OutcomeFailed, a permanent error: refused (now or before for this
//     message), ErrUnknownChannel, or a key not 1..256 bytes;
//   - OutcomeFailed, another error: a retry may succeed (or ErrInFlight).
func (d *Dispatcher) Deliver(ctx context.Context, del Delivery) (string, error) {
	outcomes, errs := d.DeliverBatch(ctx, []Delivery{del}, BatchOptions{})
	return outcomes[0], errs[0]
}

// DefaultClaimIdle is the ClaimIdle of stages delivering via a Dispatcher;
// above three handler calls, retry pauses and the send lease.
const DefaultClaimIdle = 2 * time.Minute

// Settle turns a message's delivery errors into its error: retryable if
// any is, permanent if all failures are, nil if none failed.
func Settle(errs []error) error {
	var retry, perm []error
	for _, err := range errs {
		switch {
		case err == nil:
		case stream.IsPermanent(err):
			perm = append(perm, err)
		default:
			retry = append(retry, err)
		}
	}
	switch {
	case len(retry) > 0 && len(perm) > 0:
		return fmt.Errorf("notifier: %d of %d deliveries failed: %w (and %d refused: %s)",
			len(retry), len(errs), errors.Join(retry...), len(perm), errors.Join(perm...).Error())
	case len(retry) > 0:
		return fmt.Errorf("notifier: %d of %d deliveries failed: %w", len(retry), len(errs), errors.Join(retry...))
	case len(perm) > 0:
		return stream.Permanent(fmt.Errorf("notifier: %d of %d deliveries refused: %w", len(perm), len(errs), errors.Join(perm...)))
	}
	return nil
}

// record writes recs to h (if any) even past ctx's deadline, logging a
// failure: history never fails a delivery.
func (d *Dispatcher) record(ctx context.Context, h *history.Recorder, recs []history.Record) {
	if h == nil || len(recs) == 0 {
		return
	}
	hctx, cancel := settleContext(ctx)
	defer cancel()
	if err := h.Record(hctx, recs...); err != nil {
		d.logger.WarnContext(ctx, "notifier: history not recorded", "records", len(recs), "error", err)
	}
}

// HistoryRecord returns the history record of Deliver(del)'s outcome at
// at: sent, rejected (permanent) or failed. ok is false for a duplicate or
// a delivery in flight elsewhere.
func (del Delivery) HistoryRecord(outcome string, err error, at time.Time) (rec history.Record, ok bool) {
	if outcome == OutcomeDuplicate || errors.Is(err, ErrInFlight) {
		return history.Record{}, false
	}
	n := del.Notification
	rec = history.Record{ID: NotificationID(del.Key), Flow: n.Flow, Event: n.Event, SubscriberID: n.Recipient.ID, Channel: del.Channel,
		Subject: n.Subject, Window: n.EventID, Status: history.StatusSent, Attempts: del.Attempt, ObservedAt: n.ObservedAt,
		At: at, TraceID: n.TraceID, EventID: n.EventID, MessageID: del.MessageID}
	switch {
	case err == nil:
		if !n.ObservedAt.IsZero() {
			rec.LatencyMs = max(at.Sub(n.ObservedAt).Milliseconds(), 0)
		}
	case stream.IsPermanent(err):
		rec.Status, rec.Error = history.StatusRejected, clip.String(err.Error(), maxReason)
	default:
		rec.Status, rec.Error = history.StatusFailed, clip.String(err.Error(), maxReason)
	}
	return rec, true
}

// instrumentationScope names the tracer and meter of this package.
const instrumentationScope = "github.com/dropstream/dropstream/notifier"

// Metric names of the notifier; Prometheus shows dots as underscores, plus
// _total for counters and _seconds for histograms.
const (
	// MetricNotifications counts notifications by flow, channel and outcome
	// (sent, duplicate or failed with error.type). Int64Counter.
	MetricNotifications = "dropstream.notifier.notifications"
	// MetricDeliveryDuration is one send's time, by flow, channel, outcome.
	MetricDeliveryDuration = "dropstream.notifier.delivery.duration"
	// MetricEndToEndLatency is the time from a change's run_at to its
	// delivery, by flow (and channel).
	MetricEndToEndLatency = dsotel.MetricEndToEndLatency
	// MetricResumed counts sends a crashed delivery left in flight that a
	// redelivery sent again (each may have arrived already), by flow, channel.
	MetricResumed = "dropstream.notifier.resumed"
)

// Values of the outcome attribute of MetricNotifications.
const (
	OutcomeSent      = "sent"
	OutcomeDuplicate = dsotel.OutcomeDuplicate
	OutcomeFailed    = "failed"
)

// Values of the error.type attribute of failed notifications.
const (
	errorRetryable = "retryable"
	errorPermanent = "permanent"
	errorInFlight  = "in_flight"
)

var (
	keyChannel   = attribute.Key("channel")
	keyErrorType = attribute.Key("error.type")
)

// instruments are the notifier's metrics.
type instruments struct {
	notifications metric.Int64Counter
	duration      metric.Float64Histogram
	e2e           metric.Float64Histogram
	resumed       metric.Int64Counter
}

func newInstruments(mp metric.MeterProvider) (*instruments, error) {
	mp = cmp.Or(mp, gotel.GetMeterProvider())
	m := mp.Meter(instrumentationScope)
	var in instruments
	var errs [4]error
	in.notifications, errs[0] = m.Int64Counter(MetricNotifications,
		metric.WithDescription("Notifications by flow, channel and outcome (sent, duplicate, failed)."),
		metric.WithUnit("{notification}"))
	in.duration, errs[1] = m.Float64Histogram(MetricDeliveryDuration,
		metric.WithDescription("Time of one send of a notification over its channel."), metric.WithUnit(dsotel.UnitSeconds))
	in.e2e, errs[2] = m.Float64Histogram(MetricEndToEndLatency,
		metric.WithDescription("Time from a change being observed to its delivery."), metric.WithUnit(dsotel.UnitSeconds))
	in.resumed, errs[3] = m.Int64Counter(MetricResumed,
		metric.WithDescription("Sends a stopped delivery left in flight, sent again by its redelivery."), metric.WithUnit("{notification}"))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, fmt.Errorf("notifier: metrics: %w", err)
	}
	return &in, nil
}

// outcomeAttrs caches the metrics' attribute sets, which cost a sort and a
// hash to build, as the option slices Add and Record take (a slice built
// per call was an allocation per measurement).
type outcomeAttrs struct {
	m sync.Map // outcomeKey → attrOpts
}

// outcomeKey names a set; an empty field is an attribute it lacks.
type outcomeKey struct{ flow, channel, outcome, errType string }

// attrOpts are one attribute set as options of Add and of Record.
type attrOpts struct {
	add []metric.AddOption
	rec []metric.RecordOption
}

// get returns the attributes flow and those of channel, outcome and
// error.type not empty.
func (a *outcomeAttrs) get(flow, channel, outcome, errType string) attrOpts {
	k := outcomeKey{flow, channel, outcome, errType}
	if v, ok := a.m.Load(k); ok {
		return v.(attrOpts)
	}
	kvs := []attribute.KeyValue{dsotel.FlowKey.String(k.flow)}
	for _, kv := range []attribute.KeyValue{keyChannel.String(k.channel), dsotel.OutcomeKey.String(k.outcome), keyErrorType.String(k.errType)} {
		if kv.Value.AsString() != "" {
			kvs = append(kvs, kv)
		}
	}
	opt := metric.WithAttributeSet(attribute.NewSet(kvs...))
	o := attrOpts{add: []metric.AddOption{opt}, rec: []metric.RecordOption{opt}}
	a.m.Store(k, o)
	return o
}

// DefaultResumeEpisodeGap ends an episode of resumed sends, logged in one
// line once this long passes without another.
const DefaultResumeEpisodeGap = 5 * time.Second

// MsgResumed is the warning logged once per episode of resumed sends, with
// fields deliveries, flows and seconds (first to last).
const MsgResumed = "notifier: resent deliveries a stopped copy left in flight; their receivers may have got them twice, " +
	"with the same webhook-id (counted in " + MetricResumed + ")"

// resumeEpisode gathers the resumed sends of one episode.
type resumeEpisode struct {
	mu          sync.Mutex
	gap         time.Duration // DefaultResumeEpisodeGap unless a test sets it
	open        bool
	n           int
	flows       map[string]bool
	first, last time.Time
}

// logResumed adds n resumed sends of flow to the episode, opening one.
func (d *Dispatcher) logResumed(flow string, n int) {
	e := &d.resumed
	e.mu.Lock()
	defer e.mu.Unlock()
	now := time.Now()
	e.n, e.last = e.n+n, now
	if e.flows == nil {
		e.flows = map[string]bool{}
	}
	e.flows[flow] = true
	if !e.open {
		e.open, e.first = true, now
		time.AfterFunc(cmp.Or(e.gap, DefaultResumeEpisodeGap), d.endResumed)
	}
}

// endResumed logs the episode once the gap has passed.
func (d *Dispatcher) endResumed() {
	e := &d.resumed
	e.mu.Lock()
	defer e.mu.Unlock()
	if wait := cmp.Or(e.gap, DefaultResumeEpisodeGap) - time.Since(e.last); wait > 0 {
		time.AfterFunc(wait, d.endResumed)
		return
	}
	flows := slices.Sorted(maps.Keys(e.flows))
	d.logger.Warn(MsgResumed, "deliveries", e.n, "flows", strings.Join(flows, ","), "seconds", e.last.Sub(e.first).Seconds())
	e.open, e.n, e.flows = false, 0, nil
}
