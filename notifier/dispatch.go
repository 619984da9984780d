package notifier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	gotel "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

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

// settleTimeout bounds the ledger write after a send, which runs even when
// the handler's context has ended: a send that happened must be recorded.
const settleTimeout = 5 * time.Second

// Delivery asks a Dispatcher to deliver one notification once.
type Delivery struct {
	// HashTag places the ledger record in a partition's slot
	// (stream.Topic.HashTag of the message's partition).
	HashTag string
	// Key is the business key: a notification is sent at most once per
	// key while its record lives. 1..256 bytes.
	Key string
	// Channel names the channel to send on.
	Channel string
	// MessageID and Attempt name the stream message asking for it.
	MessageID string
	Attempt   int
	// Notification is what to send.
	Notification Notification
	// Before, when set, runs once the lease is taken and before the send
	// (a throttle's wait); its error releases the lease and fails the
	// delivery retryably, so duplicates never spend it.
	Before func(ctx context.Context) error
}

// Dispatcher sends notifications on their channels, once per business key,
// through the DeliveryLedger, and reports them in metrics and spans. Every
// flow that notifies uses one. It is safe for concurrent use.
type Dispatcher struct {
	ledger   *DeliveryLedger
	channels map[string]Channel
	in       *instruments
	tracer   trace.Tracer
	logger   *slog.Logger
}

// NewDispatcher returns a dispatcher over the channels, keyed by their
// Name. Nil fields of tel default to the OpenTelemetry globals and
// slog.Default.
func NewDispatcher(ledger *DeliveryLedger, channels map[string]Channel, tel stream.Telemetry) (*Dispatcher, error) {
	if ledger == nil || len(channels) == 0 {
		return nil, errors.New("notifier: dispatcher needs a ledger and at least one channel")
	}
	chans := make(map[string]Channel, len(channels))
	for name, c := range channels {
		if c == nil || c.Name() != name {
			return nil, fmt.Errorf("notifier: channel %q is nil or names itself otherwise", name)
		}
		chans[name] = c
	}
	in, err := newInstruments(tel.MeterProvider)
	if err != nil {
		return nil, err
	}
	tp := tel.TracerProvider
	if tp == nil {
		tp = gotel.GetTracerProvider()
	}
	logger := tel.Logger
	if logger == nil {
		logger = slog.Default()
	}
	return &Dispatcher{ledger: ledger, channels: chans, in: in, tracer: tp.Tracer(instrumentationScope), logger: logger}, nil
}

// Ledger returns the dispatcher's delivery ledger.
func (d *Dispatcher) Ledger() *DeliveryLedger { return d.ledger }

// Deliver sends the notification unless its business key is recorded, and
// returns the outcome:
//
//   - OutcomeSent, nil: sent now and recorded;
//   - OutcomeDuplicate, nil: already sent, nothing done;
//   - OutcomeFailed, a permanent error (stream.IsPermanent): the channel
//     refused it, or refused it before for the same message, or the channel
//     is unknown (ErrUnknownChannel), or the key is not 1..256 bytes. A
//     later message with the same key tries again;
//   - OutcomeFailed, another error: a retry may succeed (the channel
//     failed, Redis failed, or ErrInFlight).
func (d *Dispatcher) Deliver(ctx context.Context, del Delivery) (string, error) {
	n := del.Notification
	if del.Key == "" || len(del.Key) > 256 {
		return OutcomeFailed, stream.Permanentf("notifier: business key of %d bytes: want 1..256", len(del.Key))
	}
	ctx, span := d.tracer.Start(ctx, "notify "+del.Channel, trace.WithAttributes(
		attribute.String("dropstream.notifier.flow", n.Flow), attribute.String("dropstream.notifier.channel", del.Channel),
		attribute.String("dropstream.notifier.recipient_id", n.Recipient.ID), attribute.String("dropstream.notifier.event_id", n.EventID),
		attribute.String("dropstream.notifier.session_id", n.SessionID)))
	defer span.End()
	outcome, errType, err := d.deliver(ctx, del)
	span.SetAttributes(attribute.String("dropstream.notifier.outcome", outcome))
	opts := []attribute.KeyValue{dsotel.OutcomeKey.String(outcome)}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		opts = append(opts, keyErrorType.String(errType))
	}
	if errType != "" || outcome != OutcomeFailed {
		d.in.notifications.Add(context.Background(), 1, attrs(n.Flow, del.Channel, opts...))
	}
	return outcome, err
}

// deliver returns the outcome and, for failures, the error and its type
// ("" when it must not be counted again).
func (d *Dispatcher) deliver(ctx context.Context, del Delivery) (outcome, errType string, err error) {
	n := del.Notification
	ch, ok := d.channels[del.Channel]
	if !ok {
		return OutcomeFailed, errorPermanent, stream.Permanent(fmt.Errorf("%w %q", ErrUnknownChannel, clip(del.Channel)))
	}
	key := d.ledger.Key(del.HashTag, del.Key)
	rec := DeliveryRecord{Flow: n.Flow, Channel: del.Channel, RecipientID: n.Recipient.ID, EventID: n.EventID,
		SessionID: n.SessionID, Subject: n.Subject, TraceID: n.TraceID, MessageID: del.MessageID, Attempt: del.Attempt}
	res, err := d.ledger.claim(ctx, key, &rec)
	switch {
	case err != nil:
		return OutcomeFailed, errorRetryable, err
	case res == claimSent:
		return OutcomeDuplicate, "", nil
	case res == claimBusy:
		return OutcomeFailed, errorInFlight, fmt.Errorf("%w: %s", ErrInFlight, key)
	case res == claimRejected:
		return OutcomeFailed, "", stream.Permanent(fmt.Errorf("notifier: %s refused %s earlier for message %s", del.Channel, n.Recipient.ID, del.MessageID))
	case res != claimed:
		return OutcomeFailed, errorRetryable, fmt.Errorf("notifier: claim %s: unexpected answer %q", key, res)
	}
	if del.Before != nil {
		if err := del.Before(ctx); err != nil {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
			defer cancel()
			if rerr := d.ledger.release(sctx, key, rec); rerr != nil {
				d.logger.WarnContext(ctx, "notifier: delivery lease not released", "key", key, "error", rerr)
			}
			return OutcomeFailed, errorRetryable, err
		}
	}
	start := time.Now()
	sendErr := ch.Send(ctx, n)
	took := time.Since(start).Seconds()
	// The ledger is settled even when ctx has ended.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	if sendErr == nil {
		d.in.duration.Record(context.Background(), took, attrs(n.Flow, del.Channel, dsotel.OutcomeKey.String(OutcomeSent)))
		if !n.ObservedAt.IsZero() {
			d.in.e2e.Record(context.Background(), max(0, time.Since(n.ObservedAt).Seconds()),
				metric.WithAttributes(dsotel.FlowKey.String(n.Flow)))
		}
		if err := d.ledger.sent(sctx, key, rec); err != nil {
			// Sent but not recorded: the lease still guards it until it
			// expires; only a redelivery after that could send it again.
			d.logger.ErrorContext(ctx, "notifier: delivery sent but not recorded", "key", key, "error", err)
		}
		return OutcomeSent, "", nil
	}
	d.in.duration.Record(context.Background(), took, attrs(n.Flow, del.Channel, dsotel.OutcomeKey.String(OutcomeFailed)))
	if stream.IsPermanent(sendErr) {
		if err := d.ledger.reject(sctx, key, rec, sendErr); err != nil {
			d.logger.WarnContext(ctx, "notifier: rejection not recorded", "key", key, "error", err)
		}
		return OutcomeFailed, errorPermanent, fmt.Errorf("notifier: %s to %s: %w", del.Channel, n.Recipient.ID, sendErr)
	}
	if err := d.ledger.release(sctx, key, rec); err != nil {
		// The lease expires by itself; a retry meanwhile finds it in flight.
		d.logger.WarnContext(ctx, "notifier: delivery lease not released", "key", key, "error", err)
	}
	return OutcomeFailed, errorRetryable, fmt.Errorf("notifier: %s to %s: %w", del.Channel, n.Recipient.ID, sendErr)
}
