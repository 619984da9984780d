package notifier

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	gotel "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

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
	// Before runs between claim and send; its error fails it retryably.
	Before func(ctx context.Context) error
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

// Ledger returns the dispatcher's delivery ledger.
func (d *Dispatcher) Ledger() *DeliveryLedger { return d.ledger }

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
