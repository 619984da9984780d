package comic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/stream"
)

// Config configures the comic flow. Zero fields take their defaults.
type Config struct {
	// Partitions of the flow's topics, fixed for a deployment. Default 8.
	Partitions int
	// Store configures the subscriptions.
	Store StoreConfig
	// Delivery configures the default destination.
	Delivery DeliveryConfig
	// Webhook configures the webhook channel of the built-in dispatcher.
	Webhook notifier.WebhookConfig
	// Ledger configures the delivery ledger of the built-in dispatcher.
	// Default name "comic-notify".
	Ledger notifier.DeliveryLedgerConfig
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.Partitions == 0 {
		c.Partitions = 8
	}
	c.Store = c.Store.WithDefaults()
	if c.Ledger.Name == "" {
		c.Ledger.Name = "comic-notify"
	}
	c.Ledger = c.Ledger.WithDefaults()
	return c
}

// Validate reports every invalid field of a defaulted config.
func (c Config) Validate() error {
	var errs []error
	if c.Partitions < 1 || c.Partitions > stream.MaxPartitions {
		errs = append(errs, fmt.Errorf("comic: partitions %d out of range 1..%d", c.Partitions, stream.MaxPartitions))
	}
	errs = append(errs, c.Store.Validate(), c.Delivery.Validate(), c.Ledger.Validate())
	return errors.Join(errs...)
}

// Service is the comic flow: subscriptions, inventory, the matching and
// delivery stages, and sales.
type Service struct {
	Topics        Topics
	Subscriptions *Store
	Inventory     *Inventory
	Matcher       *Matcher
	Delivery      *Delivery
	// Sales is nil when no Payments were given.
	Sales  *Sales
	ledger *notifier.DeliveryLedger
}

// New builds the flow over rdb. The delivery goes through a
// notifier.Dispatcher over the webhook and log channels with its own
// DeliveryLedger; payments may be nil (no sales).
func New(rdb redis.UniversalClient, cfg Config, payments Payments, tel stream.Telemetry) (*Service, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	topics := NewTopics(cfg.Partitions)
	store, err := NewStore(rdb, cfg.Store)
	if err != nil {
		return nil, err
	}
	ledger, err := notifier.NewDeliveryLedger(rdb, cfg.Ledger)
	if err != nil {
		return nil, err
	}
	logger := tel.Logger
	if logger == nil {
		logger = slog.Default()
	}
	channels, err := notifier.NewChannels(cfg.Webhook, logger)
	if err != nil {
		return nil, err
	}
	disp, err := notifier.NewDispatcher(ledger, channels, tel)
	if err != nil {
		return nil, err
	}
	inv := NewInventory(rdb, topics, tel.Propagator)
	del, err := NewDelivery(rdb, topics, store, disp, cfg.Delivery)
	if err != nil {
		return nil, err
	}
	s := &Service{Topics: topics, Subscriptions: store, Inventory: inv, Matcher: NewMatcher(rdb, topics, nil, tel.Propagator),
		Delivery: del, ledger: ledger}
	if payments != nil {
		s.Sales = NewSales(rdb, topics, inv, payments, ledger.Key)
	}
	return s, nil
}

// Stages returns the matching and delivery stages.
func (s *Service) Stages() []stream.Stage {
	return []stream.Stage{s.Matcher.Stage(), s.Delivery.Stage()}
}

// Ledger returns the delivery ledger.
func (s *Service) Ledger() *notifier.DeliveryLedger { return s.ledger }

// DemoSubscriptions are the subscriptions SeedDemo creates.
var DemoSubscriptions = []struct {
	Email string
	Body  string
}{
	{"peter@example.com", `{"publisher":"Marvel","series":"The Amazing Spider-Man"}`},
	{"bruce@example.com", `{"key_issue":true,"publisher":"DC"}`},
}

// SeedDemo creates the demo subscriptions; existing ones are kept.
func (s *Service) SeedDemo(ctx context.Context) error {
	for _, d := range DemoSubscriptions {
		_, err := s.Subscriptions.Create(ctx, d.Email, json.RawMessage(d.Body), "")
		if err != nil && !errors.Is(err, ErrDuplicate) {
			return fmt.Errorf("comic: demo subscription: %w", err)
		}
	}
	return nil
}
