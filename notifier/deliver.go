package notifier

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/dropstream/dropstream/notifier/digest"
	"github.com/dropstream/dropstream/notifier/history"
	"github.com/dropstream/dropstream/notifier/subscriber"
	"github.com/dropstream/dropstream/notifier/throttle"
	"github.com/dropstream/dropstream/stream"
)

// DeliverStageName is the generic delivery stage's name and group.
const DeliverStageName = "notifier-deliver"

// ErrThrottled: a destination or channel is over its rate (or blocked by a
// Retry-After) for longer than DeliverConfig.MaxThrottleWait. Retryable.
var ErrThrottled = errors.New("notifier: throttled")

// Defaults of DeliverConfig.
const (
	DefaultDeliverConcurrency = 64
	DefaultMaxThrottleWait    = 2 * time.Second
	DefaultPublicURL          = "http://localhost:8080"
	DefaultDigestInterval     = 5 * time.Second
	// DefaultDeliverHandlerTimeout bounds one batch call; four tries and
	// their pauses (95s) stay below DefaultClaimIdle.
	DefaultDeliverHandlerTimeout = 20 * time.Second
)

// DeliverConfig configures a Deliverer. Zero fields take their defaults.
type DeliverConfig struct {
	// Ledger configures the delivery ledger shared with every flow.
	Ledger DeliveryLedgerConfig
	// Concurrency bounds the requests of a batch handled at once.
	// Default 64, range 1..1024.
	Concurrency int
	// MaxThrottleWait is how long a send waits for its throttle in the
	// handler; longer waits fail the message retryably. Default 2s.
	MaxThrottleWait time.Duration
	// PublicURL is the base of the links in messages (unsubscribe).
	// Default "http://localhost:8080".
	PublicURL string
	// DigestInterval is how often RunDigests looks for due windows.
	// Default 5s.
	DigestInterval time.Duration
	// Runner tunes the stage. Zero fields take: HandlerTimeout 20s,
	// ClaimIdle 2m, Retry 3 retries from 200ms doubling to 5s with jitter,
	// MaxDeliveries 5; the rest the stream defaults.
	Runner stream.RunnerConfig
	// Now is the clock of preferences and digests. Default time.Now.
	Now func() time.Time
}

// WithDefaults returns c with every zero field set to its default.
func (c DeliverConfig) WithDefaults() DeliverConfig {
	c.Ledger = c.Ledger.WithDefaults()
	if c.Concurrency == 0 {
		c.Concurrency = DefaultDeliverConcurrency
	}
	if c.MaxThrottleWait == 0 {
		c.MaxThrottleWait = DefaultMaxThrottleWait
	}
	if c.PublicURL == "" {
		c.PublicURL = DefaultPublicURL
	}
	if c.DigestInterval == 0 {
		c.DigestInterval = DefaultDigestInterval
	}
	if c.Runner.HandlerTimeout == 0 {
		c.Runner.HandlerTimeout = DefaultDeliverHandlerTimeout
	}
	if c.Runner.ClaimIdle == 0 {
		c.Runner.ClaimIdle = DefaultClaimIdle
	}
	if c.Runner.Retry == (stream.RetryConfig{}) {
		c.Runner.Retry = stream.RetryConfig{MaxRetries: 3, InitialInterval: 200 * time.Millisecond, MaxInterval: 5 * time.Second}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate reports every invalid field of a defaulted config.
func (c DeliverConfig) Validate() error {
	errs := []error{c.Ledger.Validate()}
	if c.Concurrency < 1 || c.Concurrency > 1024 {
		errs = append(errs, fmt.Errorf("notifier: deliver concurrency %d out of range 1..1024", c.Concurrency))
	}
	if c.MaxThrottleWait < 0 || c.DigestInterval < 10*time.Millisecond {
		errs = append(errs, errors.New("notifier: max throttle wait must not be negative, digest interval at least 10ms"))
	}
	runner := c.Runner.WithDefaults(DeliverStageName)
	if err := runner.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("notifier: deliver runner: %w", err))
	}
	if c.Ledger.Lease >= runner.ClaimIdle {
		errs = append(errs, fmt.Errorf("notifier: send lease %s must stay below claim idle %s", c.Ledger.Lease, runner.ClaimIdle))
	}
	return errors.Join(errs...)
}

// Deliverer is the generic delivery of notification requests: the
// "notifier-deliver" stage over RequestTopic and the digest flusher. See
// Request and the package documentation.
type Deliverer struct {
	topic    stream.Topic
	subs     *subscriber.Store
	dispatch *Dispatcher
	throttle *throttle.Throttle
	digests  *digest.Store
	history  *history.Recorder
	pub      *stream.Publisher
	cfg      DeliverConfig
	logger   *slog.Logger
}

// DeliverDeps are a Deliverer's collaborators. Subscribers, Channels and
// Publisher are required; Throttle (nil: no throttling) and History (nil:
// no history) are optional.
type DeliverDeps struct {
	Subscribers *subscriber.Store
	Channels    map[string]Channel
	Throttle    *throttle.Throttle
	History     *history.Recorder
	// Publisher publishes digests back to the request topic.
	Publisher *stream.Publisher
}

// NewDeliverer returns the delivery of topic's requests over rdb.
func NewDeliverer(rdb redis.UniversalClient, topic stream.Topic, deps DeliverDeps, cfg DeliverConfig, tel stream.Telemetry) (*Deliverer, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := topic.Validate(); err != nil {
		return nil, fmt.Errorf("notifier: %w", err)
	}
	if rdb == nil || deps.Subscribers == nil || deps.Publisher == nil {
		return nil, errors.New("notifier: deliverer needs Redis, a subscriber store and a publisher")
	}
	ledger, err := NewDeliveryLedger(rdb, cfg.Ledger)
	if err != nil {
		return nil, err
	}
	dispatch, err := NewDispatcher(ledger, deps.Channels, tel)
	if err != nil {
		return nil, err
	}
	logger := tel.Logger
	if logger == nil {
		logger = slog.Default()
	}
	return &Deliverer{topic: topic, subs: deps.Subscribers, dispatch: dispatch, throttle: deps.Throttle, digests: digest.NewStore(rdb, 0),
		history: deps.History, pub: deps.Publisher, cfg: cfg, logger: logger}, nil
}

// Stage returns the "notifier-deliver" stage: a batch handler delivering up
// to Concurrency requests of a batch at once. A request whose sends fail
// retryably fails alone and is retried (backoff with jitter within the
// delivery, then redelivered) and dead-lettered after MaxDeliveries;
// `dropstream dlq replay` sends it again, and the ledger skips what was
// already sent.
func (d *Deliverer) Stage() stream.Stage {
	return stream.Stage{Name: DeliverStageName, Topic: d.topic, BatchHandler: d.handleBatch, Config: d.cfg.Runner}
}

// recordBuffer collects a batch's history records, written in one round
// trip once the batch is handled.
type recordBuffer struct {
	mu   sync.Mutex
	recs []history.Record
}

type recordBufferKey struct{}

func (b *recordBuffer) add(r history.Record) {
	b.mu.Lock()
	b.recs = append(b.recs, r)
	b.mu.Unlock()
}

func (d *Deliverer) handleBatch(ctx context.Context, msgs []*stream.Message) error {
	if d.history != nil {
		buf := &recordBuffer{}
		ctx = context.WithValue(ctx, recordBufferKey{}, buf)
		defer func() {
			// Written even when the batch's deadline has passed: the
			// sends happened.
			hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
			defer cancel()
			if err := d.history.Record(hctx, buf.recs...); err != nil {
				d.logger.WarnContext(ctx, "notifier: history not recorded", "records", len(buf.recs), "error", err)
			}
		}()
	}
	errs := make([]error, len(msgs))
	sem := make(chan struct{}, d.cfg.Concurrency)
	var wg sync.WaitGroup
	for i, m := range msgs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			// Each send continues its producer's trace, under the
			// batch's deadline.
			mctx := ctx
			if sc := trace.SpanContextFromContext(m.Context()); sc.IsValid() {
				mctx = trace.ContextWithSpanContext(ctx, sc)
			}
			errs[i] = d.handle(mctx, m)
		})
	}
	wg.Wait()
	return &stream.BatchError{Errs: errs}
}

func (d *Deliverer) handle(ctx context.Context, m *stream.Message) error {
	if m.Type != TypeRequest {
		return stream.Permanentf("notifier: message %s has type %q, want %q", m.ID, clip(m.Type), TypeRequest)
	}
	if len(m.Payload) > MaxRequestBytes {
		return stream.Permanentf("notifier: request %s of %d bytes exceeds %d", m.ID, len(m.Payload), MaxRequestBytes)
	}
	var r Request
	if err := json.Unmarshal(m.Payload, &r); err != nil {
		return stream.Permanentf("notifier: decode request %s: %w", m.ID, err)
	}
	if err := r.Validate(); err != nil {
		return stream.Permanent(fmt.Errorf("notifier: request %s: %w", m.ID, err))
	}
	if r.TraceID == "" {
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			r.TraceID = sc.TraceID().String()
		}
	}
	return d.Deliver(ctx, m, r)
}

// target is one destination a request goes to.
type target struct {
	subscriberID string
	dest         subscriber.Destination
	prefs        *subscriber.Preferences // nil for inline destinations
	loc          *time.Location
}

// Deliver delivers one request carried by m to each of its targets and
// returns the message's error (see settle).
func (d *Deliverer) Deliver(ctx context.Context, m *stream.Message, r Request) error {
	targets, err := d.targets(ctx, r)
	if err != nil || len(targets) == 0 {
		return err
	}
	errs := make([]error, len(targets))
	for i, t := range targets {
		errs[i] = d.deliverTo(ctx, m, r, t)
	}
	return settle(errs)
}

// targets resolves the request's destinations.
func (d *Deliverer) targets(ctx context.Context, r Request) ([]target, error) {
	if r.Destination != nil {
		dest := *r.Destination
		if dest.ID == "" {
			core, _ := dest.Core()
			dest.ID = "x" + subscriber.CoreHash(core)[:16]
		}
		sid := r.SubscriberID
		if sid == "" {
			sid = dest.ID
		}
		return []target{{subscriberID: sid, dest: dest}}, nil
	}
	s, err := d.subs.Resolve(ctx, r.SubscriberID)
	if errors.Is(err, subscriber.ErrNotFound) {
		d.logger.InfoContext(ctx, "notifier: request for an unknown subscriber dropped", "subscriber_id", r.SubscriberID)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	loc := s.Location()
	var out []target
	for _, dest := range s.Destinations {
		if r.DestinationID != "" && dest.ID != r.DestinationID {
			continue
		}
		out = append(out, target{subscriberID: s.ID, dest: dest, prefs: &s.Preferences, loc: loc})
	}
	return out, nil
}
