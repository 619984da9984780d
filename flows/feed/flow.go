package feed

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"
	gotel "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/dropstream/dropstream/internal/egress"
	"github.com/dropstream/dropstream/internal/quota"
	"github.com/dropstream/dropstream/internal/settings"
	"github.com/dropstream/dropstream/internal/tick"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/subscriber"
	"github.com/dropstream/dropstream/stream"
)

// Stage names.
const (
	StageAssign  = "feed-assign"
	StageDeliver = "feed-deliver"
	StageHistory = "feed-history"
)

// Sender delivers a notification once per business key (a notifier.Dispatcher).
type Sender interface {
	Deliver(ctx context.Context, d notifier.Delivery) (string, error)
}

// Deps are the flow's collaborators in the notifier; all are required.
type Deps struct {
	// Subscribers is the notifier's store of subscription destinations.
	Subscribers *subscriber.Store
	// Notify hands requests to the notifier flow, which sends each once per
	// (subscriber, destination, subject, window).
	Notify func(ctx context.Context, reqs ...notifier.Request) error
	// Sender delivers to log destinations (development, the demo).
	Sender Sender
}

// Config configures the flow. Zero fields take their defaults.
type Config struct {
	// Partitions of the feed topics. Default 8.
	Partitions int `default:"8" range:"1..1024"` // 1..stream.MaxPartitions
	// PublicURL is the API's base URL for opt-in links (/v1/confirm/<token>).
	// Default "http://localhost:8080".
	PublicURL string `default:"http://localhost:8080"`
	// AssignLimit bounds the items one poll message assigns. Default 1000.
	AssignLimit int `default:"1000" range:"1..100000"`
	// CollectionItems completes a daily or weekly collection early. Default 1000.
	CollectionItems int `default:"1000" range:"1..10000"`
	// Egress is the fetches' policy (unless PollerConfig.Fetch sets one); the
	// routes refuse URLs whose host it denies. Default: egress.Default().
	Egress *egress.Policy
	// Logger defaults to slog.Default.
	Logger *slog.Logger
	// MeterProvider defaults to the global one.
	MeterProvider metric.MeterProvider
	// MaxFeedsPerCaller and MaxSubscriptionsPerCaller cap what each API caller
	// creates (FeedQuota, SubscriptionQuota). 0: no cap.
	MaxFeedsPerCaller, MaxSubscriptionsPerCaller int `range:"0.."`
	// Etiquette bounds polling: cache headers and hints, the adaptive
	// interval, per-host spacing, dead feeds.
	Etiquette EtiquetteConfig
	// WebSub configures subscribing to the hubs feeds advertise.
	WebSub WebSubConfig
	// Now is the WebSub callback's clock. Default time.Now.
	Now func() time.Time
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	settings.Defaults(&c)
	c.Egress = cmp.Or(c.Egress, egress.Default())
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.MeterProvider = cmp.Or(c.MeterProvider, gotel.GetMeterProvider())
	c.Etiquette = c.Etiquette.WithDefaults()
	c.WebSub = c.WebSub.WithDefaults()
	c.Now = tick.Or(c.Now)
	return c
}

// Validate reports every invalid field of a defaulted config.
func (c Config) Validate() error {
	errs := []error{settings.Check("feed", &c)}
	if len(c.PublicURL) > 512 {
		errs = append(errs, errors.New("feed: public URL too long"))
	}
	errs = append(errs, c.Etiquette.Validate(), c.WebSub.Validate())
	return errors.Join(errs...)
}

// Flow is the feed flow: its store and its stages.
type Flow struct {
	rdb    redis.UniversalClient
	topics Topics
	store  *Store
	pub    *stream.Publisher
	deps   Deps
	cfg    Config
	log    *slog.Logger

	// Instruments (metrics.go).
	guidWarnings, items, collections                             metric.Int64Counter
	requests, bytes, schedules, held, halts, websubEvents, moved metric.Int64Counter

	// hubClient sends WebSub requests through the egress policy.
	hubClient *http.Client

	// poller is the feed-poller service of a flow built by New.
	poller *Poller
	// feedCap and subCap cap what each caller creates (New); nil: none.
	feedCap, subCap *quota.Quota
	// tel is the app's telemetry (New), for the history's writer.
	tel stream.Telemetry

	// crashPoint, when set (tests), runs at a named point of a handler:
	// "observed", "assigned" or "delivered" (before the release).
	crashPoint func(point string, m *stream.Message) error
}

// NewWith returns the flow over rdb and Deps without a poller, for tests
// and tools that run the stages and a poller themselves.
func NewWith(rdb redis.UniversalClient, pub *stream.Publisher, deps Deps, cfg Config) (*Flow, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Sender == nil || deps.Subscribers == nil || deps.Notify == nil {
		return nil, errors.New("feed: a sender, the notifier's subscriber store and its notify function are required")
	}
	topics := NewTopics(cfg.Partitions)
	meter := cfg.MeterProvider.Meter("github.com/dropstream/dropstream/flows/feed")
	f := &Flow{rdb: rdb, topics: topics, store: NewStore(rdb, topics), pub: pub, deps: deps, cfg: cfg, log: cfg.Logger}
	if err := f.initMetrics(meter); err != nil {
		return nil, err
	}
	f.hubClient = &http.Client{Transport: cfg.Egress.Transport(), Timeout: cfg.WebSub.Timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 3 {
				return errors.New("feed: websub hub: too many redirects")
			}
			return cfg.Egress.CheckRedirect(req)
		}}
	feeds, err := quota.Optional(rdb, "feeds", cfg.MaxFeedsPerCaller)
	if err != nil {
		return nil, err
	}
	subs, err := quota.Optional(rdb, "feed-subscriptions", cfg.MaxSubscriptionsPerCaller)
	if err != nil {
		return nil, err
	}
	f.feedCap = feeds.WithExists(func(ctx context.Context, id string) (bool, error) {
		_, err := f.store.Feed(ctx, id)
		return present(err)
	})
	f.subCap = subs.WithExists(func(ctx context.Context, id string) (bool, error) {
		_, err := f.store.Subscription(ctx, id)
		return present(err)
	})
	return f, nil
}

// Egress is the policy of the flow's outbound connections.
func (f *Flow) Egress() *egress.Policy { return f.cfg.Egress }

// Store returns the flow's definitions store.
func (f *Flow) Store() *Store { return f.store }

// Topics returns the flow's topics.
func (f *Flow) Topics() Topics { return f.topics }

// Stages returns the assignment and delivery stages (the history stage
// needs ClickHouse: see History).
func (f *Flow) Stages() []stream.Stage {
	return []stream.Stage{
		{Name: StageAssign, Topic: f.topics.Polls, Handler: f.handlePoll},
		{Name: StageDeliver, Topic: f.topics.Collections, Handler: f.handleCollection},
	}
}
