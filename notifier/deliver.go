package notifier

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	gojson "github.com/goccy/go-json"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/internal/settings"
	"github.com/dropstream/dropstream/internal/tick"
	"github.com/dropstream/dropstream/notifier/digest"
	"github.com/dropstream/dropstream/notifier/history"
	"github.com/dropstream/dropstream/notifier/subscriber"
	"github.com/dropstream/dropstream/notifier/throttle"
	"github.com/dropstream/dropstream/stream"
)

// ErrThrottled: throttled longer than DeliverConfig.MaxThrottleWait. Retryable.
var ErrThrottled = errors.New("notifier: throttled")

// Defaults of DeliverConfig.
const (
	DefaultMaxThrottleWait = 2 * time.Second
	// DefaultDeliverHandlerTimeout bounds one batch call; four tries and
	// their pauses (95s) stay below DefaultClaimIdle.
	DefaultDeliverHandlerTimeout = 20 * time.Second
)

// DeliverConfig configures a Deliverer. Zero fields take their defaults.
type DeliverConfig struct {
	// Ledger configures the delivery ledger shared with every flow.
	Ledger DeliveryLedgerConfig
	// Concurrency bounds a batch's sends in flight. Default 64, 1..1024.
	Concurrency int `default:"64" range:"1..1024"`
	// MaxInFlight bounds sends in flight across the stage's batches: a copy
	// sends at most MaxInFlight / (answer time) per second. Default 64, 1..4096.
	MaxInFlight int `default:"64" range:"1..4096"`
	// MaxThrottleWait bounds a throttle wait; longer fails retryably. Default 2s.
	MaxThrottleWait time.Duration `range:"0.."`
	// PublicURL is the links' base. Default "http://localhost:8080".
	PublicURL string `default:"http://localhost:8080"`
	// DigestInterval is how often RunDigests looks for due windows. Default 5s.
	DigestInterval time.Duration `default:"5s" range:"10ms.."`
	// Retry configures the retries of failed sends.
	Retry RetryConfig
	// Runner tunes the stage. Defaults: HandlerTimeout 20s, ClaimIdle 2m,
	// Retry disabled (the notifier schedules its own), the rest the stream's.
	Runner stream.RunnerConfig
	// Now is the clock of preferences and digests. Default time.Now.
	Now func() time.Time
}

// WithDefaults returns c with every zero field set to its default.
func (c DeliverConfig) WithDefaults() DeliverConfig {
	settings.Defaults(&c)
	c.Ledger = c.Ledger.WithDefaults()
	c.MaxThrottleWait = cmp.Or(c.MaxThrottleWait, DefaultMaxThrottleWait)
	c.Runner.HandlerTimeout = cmp.Or(c.Runner.HandlerTimeout, DefaultDeliverHandlerTimeout)
	c.Runner.ClaimIdle = cmp.Or(c.Runner.ClaimIdle, DefaultClaimIdle)
	if c.Runner.Retry == (stream.RetryConfig{}) {
		c.Runner.Retry = stream.RetryConfig{Disabled: true}
	}
	c.Retry = c.Retry.WithDefaults()
	c.Now = tick.Or(c.Now)
	return c
}

// Validate reports every invalid field of a defaulted config.
func (c DeliverConfig) Validate() error {
	errs := []error{settings.Check("notifier: deliver", &c), c.Ledger.Validate(), c.Retry.Validate()}
	runner := c.Runner.WithDefaults(StageDeliver)
	if err := runner.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("notifier: deliver runner: %w", err))
	}
	if c.Ledger.Lease >= runner.ClaimIdle {
		errs = append(errs, fmt.Errorf("notifier: send lease %s must stay below claim idle %s", c.Ledger.Lease, runner.ClaimIdle))
	}
	return errors.Join(errs...)
}

// Deliverer is the "notifier-deliver" stage and the digest flusher.
type Deliverer struct {
	rdb      redis.UniversalClient
	topic    stream.Topic
	tags     []string      // hash tag of each partition
	slots    chan struct{} // sends in flight, MaxInFlight at most
	subs     *subscriber.Store
	dispatch *Dispatcher
	throttle *throttle.Throttle
	tkeys    throttleKeys
	digests  *digest.Store
	history  *history.Recorder
	pub      *stream.Publisher
	cfg      DeliverConfig
	logger   *slog.Logger
}

// DeliverDeps are a Deliverer's collaborators; Throttle and History may be nil.
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
	logger := cmp.Or(tel.Logger, slog.Default())
	tags := make([]string, topic.Partitions)
	for p := range tags {
		tags[p] = topic.HashTag(p)
	}
	return &Deliverer{rdb: rdb, topic: topic, tags: tags, slots: make(chan struct{}, cfg.MaxInFlight), subs: deps.Subscribers,
		dispatch: dispatch, throttle: deps.Throttle, digests: digest.NewStore(rdb, 0), history: deps.History, pub: deps.Publisher,
		tkeys: newThrottleKeys(), cfg: cfg, logger: logger}, nil
}

// tag is the hash tag of partition p of the request topic.
func (d *Deliverer) tag(p int) string {
	if p >= 0 && p < len(d.tags) {
		return d.tags[p]
	}
	return d.topic.HashTag(p)
}

// Stage returns the "notifier-deliver" stage. A retryable failure is acked
// and filed for RunRetries (dead-lettered after Retry.MaxAttempts); one
// that cannot be filed stays pending.
func (d *Deliverer) Stage() stream.Stage {
	return stream.Stage{Name: StageDeliver, Topic: d.topic, BatchHandler: d.handleBatch, Config: d.cfg.Runner}
}

func (d *Deliverer) handleBatch(ctx context.Context, msgs []*stream.Message) error {
	errs := make([]error, len(msgs))
	reqs := make([]Request, len(msgs))
	for i, m := range msgs {
		errs[i] = decodeRequest(m, &reqs[i])
	}
	recs := d.deliverAll(ctx, msgs, reqs, errs)
	d.scheduleRetries(ctx, msgs, errs)
	d.dispatch.record(ctx, d.history, recs)
	return &stream.BatchError{Errs: errs}
}

// decodeRequest decodes and checks m's request; errors are permanent.
func decodeRequest(m *stream.Message, r *Request) error {
	if m.Type != TypeRequest {
		return stream.Permanentf("notifier: message %s has type %q, want %q", m.ID, clip.Marked(m.Type, maxQuoted), TypeRequest)
	}
	if len(m.Payload) > MaxRequestBytes {
		return stream.Permanentf("notifier: request %s of %d bytes exceeds %d", m.ID, len(m.Payload), MaxRequestBytes)
	}
	if err := gojson.Unmarshal(m.Payload, r); err != nil { // encoding/json's result, faster
		return stream.Permanentf("notifier: decode request %s: %w", m.ID, err)
	}
	if err := r.Validate(); err != nil {
		return stream.Permanent(fmt.Errorf("notifier: request %s: %w", m.ID, err))
	}
	if r.TraceID == "" {
		if sc := trace.SpanContextFromContext(m.Context()); sc.IsValid() {
			r.TraceID = sc.TraceID().String()
		}
	}
	return nil
}

// target is one destination a request goes to.
type target struct {
	subscriberID string
	dest         subscriber.Destination
	prefs        subscriber.Preferences // a copy: a pointer into the subscriber moved it to the heap
	inline       bool                   // a request's own destination: no preferences apply
	loc          *time.Location
}

// resolveAll returns the requests' subscribers by id in one round trip.
func (d *Deliverer) resolveAll(ctx context.Context, reqs []Request, errs []error) (map[string]subscriber.Subscriber, error) {
	var ids []string
	for i, r := range reqs {
		if errs[i] == nil && r.Destination == nil {
			ids = append(ids, r.SubscriberID)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	return d.subs.ResolveMany(ctx, ids)
}

// targets appends the request's destinations among subs to out.
func (d *Deliverer) targets(ctx context.Context, r *Request, subs map[string]subscriber.Subscriber, out []target) []target {
	if r.Destination != nil {
		dest := *r.Destination
		if dest.ID == "" {
			core, _ := dest.Core()
			dest.ID = "x" + subscriber.CoreHash(core)[:16]
		}
		return append(out, target{subscriberID: cmp.Or(r.SubscriberID, dest.ID), dest: dest, inline: true})
	}
	s, ok := subs[r.SubscriberID]
	if !ok {
		d.logger.InfoContext(ctx, "notifier: request for an unknown subscriber dropped", "subscriber_id", r.SubscriberID)
		return out
	}
	loc := s.Location()
	for _, dest := range s.Destinations {
		if r.DestinationID != "" && dest.ID != r.DestinationID {
			continue
		}
		out = append(out, target{subscriberID: s.ID, dest: dest, prefs: s.Preferences, loc: loc})
	}
	return out
}
