package comic

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/flows/checkout"
	"github.com/dropstream/dropstream/internal/egress"
	"github.com/dropstream/dropstream/internal/quota"
	"github.com/dropstream/dropstream/internal/rediskey"
	"github.com/dropstream/dropstream/internal/settings"
	"github.com/dropstream/dropstream/internal/tenancy"
	"github.com/dropstream/dropstream/internal/tick"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer/flowhistory"
)

// Name is the flow name: the prefix of its stages and topics, and of its keys.
const Name = "comic"

// Message types of the flow.
const (
	// TypeJob is a notification job on the jobs topic (payload: Job).
	TypeJob = "comic.job"
	// TypeNotify is a notification request on the notify topic (payload:
	// Request).
	TypeNotify = "comic.notify"
	// TypeEvent is an inventory or sale event on the events topic
	// (payload: Event).
	TypeEvent = "comic.event"
)

// Topics are the flow's streams, all keyed by comic id with one partition
// count, so everything about a comic lives in the slot of {comic.p}.
type Topics struct {
	// Jobs carries one notification job per intake of a comic.
	Jobs stream.Topic
	// Notify carries one notification request per (subscriber, comic).
	Notify stream.Topic
	// Events carries inventory and sale events, for the history.
	Events stream.Topic
}

// NewTopics returns the flow's topics with the given partition count.
func NewTopics(partitions int) Topics {
	return Topics{
		Jobs:   stream.NewTopic(Name, "jobs", partitions),
		Notify: stream.NewTopic(Name, "notify", partitions),
		Events: stream.NewTopic(Name, "events", partitions),
	}
}

// tag returns the hash tag of a comic's partition.
func (t Topics) tag(comicID string) string {
	return t.Jobs.HashTag(t.Jobs.Partition(comicID))
}

// Per-comic keys, in the comic's partition slot:
//
//	ds:{comic.p}:comic:inv:<id>       hash: comic (canonical), gen, added_at_ms, hold_ms
//	ds:{comic.p}:comic:gen:<id>       counter: intakes of the comic
//	ds:{comic.p}:comic:inventory      zset: ids in inventory by added_at_ms
//	ds:{comic.p}:comic:jobdone:<id>   string: the latest gen matched
//	ds:{comic.p}:comic:pending:<id>   set: subscription ids told, until delivered
//	ds:{comic.p}:comic:notified:<id>  hash: email → Notified, the history
//	ds:{comic.p}:comic:hold:<id>      hash: gen, salt, size, window (ms), wave, ends (ms, 0: none), w<n>: "<told ms>,<count>"
//	ds:{comic.p}:comic:lottery:<id>   zset: matching subscription ids by lottery score, for the hold's gen
//	ds:{comic.p}:comic:holds          zset: comic ids by the end of their hold (ms), read by ServiceWaves
//	ds:{comic.p}:comic:sale:<id>      list: Sale JSON, oldest first
//	ds:{comic.p}:comic:txn:<txn>      hash: state, comic, email, payment, price, gen, at_ms
//	ds:{comic.p}:comic:purchases      zset: txn ids in doubt by start ms
func inventoryKey(tag, id string) string { return rediskey.Key(tag, "comic", "inv", id) }
func genKey(tag, id string) string       { return rediskey.Key(tag, "comic", "gen", id) }
func jobDoneKey(tag, id string) string   { return rediskey.Key(tag, "comic", "jobdone", id) }
func pendingKey(tag, id string) string   { return rediskey.Key(tag, "comic", "pending", id) }
func notifiedKey(tag, id string) string  { return rediskey.Key(tag, "comic", "notified", id) }
func saleKey(tag, id string) string      { return rediskey.Key(tag, "comic", "sale", id) }
func inventoryIndex(tag string) string   { return rediskey.Key(tag, "comic", "inventory") }
func purchaseKey(tag, txn string) string { return rediskey.Key(tag, "comic", "txn", txn) }
func purchasesKey(tag string) string     { return rediskey.Key(tag, "comic", "purchases") }
func holdKey(tag, id string) string      { return rediskey.Key(tag, "comic", "hold", id) }
func lotteryKey(tag, id string) string   { return rediskey.Key(tag, "comic", "lottery", id) }
func holdsKey(tag string) string         { return rediskey.Key(tag, "comic", "holds") }
func eventsStream(t Topics, id string) string {
	return t.Events.Stream(t.Events.Partition(id))
}

// Subscription keys share the hash tag {comic-subs}, so one script creates
// a subscription with all its index entries.
const subsTag = "{comic-subs}"

const (
	subsKey       = rediskey.Prefix + subsTag + ":comic:subs"       // hash: id → Subscription JSON
	patternsKey   = rediskey.Prefix + subsTag + ":comic:patterns"   // zset: pattern → subscriptions
	patVersionKey = rediskey.Prefix + subsTag + ":comic:patver"     // counter: bumped when a pattern appears or disappears, or a value set gets a new shard
	bloatKey      = rediskey.Prefix + subsTag + ":comic:bloat"      // hash: "<pattern>:<values hash>" → shards past the first
	fieldTotalKey = rediskey.Prefix + subsTag + ":comic:fieldtotal" // hash: field → subscriptions constraining it
	emailPrefix   = rediskey.Prefix + subsTag + ":comic:email:"     // set per email: subscription ids
	tenantEmailPx = rediskey.Prefix + subsTag + ":comic:temail:"    // set per tenant and email: its subscription ids
	indexPrefix   = rediskey.Prefix + subsTag + ":comic:idx:"       // set per (pattern, values, shard): ids; of a ranged pattern a zset of indexEntry members
	fieldStatsPfx = rediskey.Prefix + subsTag + ":comic:field:"     // zset per field: index value → subscriptions
)

func emailKey(email string) string { return emailPrefix + email }

// tenantEmailKey is the set of one tenant's subscriptions of email: the
// cap of subscriptions per email counts it, so each tenant has its own.
func tenantEmailKey(tenant, email string) string {
	return tenantEmailPx + tenancy.Of(tenant) + ":" + email
}

// indexKey is shard k of the set of subscription ids of one pattern whose
// values hash to vh (k = 0 for the first shard).
func indexKey(pattern, vh string, k int) string {
	if k == 0 {
		return indexPrefix + pattern + ":" + vh
	}
	return indexPrefix + pattern + ":" + vh + "#" + strconv.Itoa(k)
}

// bloatField names a value set in bloatKey.
func bloatField(pattern, vh string) string { return pattern + ":" + vh }

func fieldStatsKey(field string) string { return fieldStatsPfx + field }

// Config configures the comic flow. Zero fields take their defaults.
type Config struct {
	// Partitions of the flow's topics, fixed for a deployment. Default 8.
	Partitions int `default:"8" range:"1..1024"` // 1..stream.MaxPartitions
	// Store configures the subscriptions.
	Store StoreConfig
	// Delivery configures the default destination.
	Delivery DeliveryConfig
	// Holds configures the purchase holds and their waves.
	Holds HoldConfig
	// Webhook configures the webhook channel of the built-in dispatcher.
	Webhook notifier.WebhookConfig
	// Ledger configures the built-in dispatcher's delivery ledger.
	// Default name "comic-notify".
	Ledger notifier.DeliveryLedgerConfig
	// MaxSubscriptionsPerCaller caps each API caller's subscriptions. 0: no cap.
	MaxSubscriptionsPerCaller int
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	settings.Defaults(&c)
	settings.Defaults(&c.Delivery)
	c.Store = c.Store.WithDefaults()
	c.Holds = c.Holds.WithDefaults()
	c.Ledger.Name = cmp.Or(c.Ledger.Name, "comic-notify")
	c.Ledger = c.Ledger.WithDefaults()
	return c
}

// Validate reports every invalid field of a defaulted config.
func (c Config) Validate() error {
	return errors.Join(settings.Check("comic", &c), c.Store.Validate(), c.Delivery.Validate(), c.Ledger.Validate(), c.Holds.Validate())
}

// The flow's loops beside its stages.
const (
	ServiceRecovery = "comic-purchase-recovery" // settles purchases in doubt
	// ServiceStatsSnapshot snapshots the subscription statistics into
	// ClickHouse every minute (only with ClickHouse).
	ServiceStatsSnapshot = "comic-stats-snapshot"
	ServiceWaves         = "comic-hold-waves" // tells the next waves
)

// RecoveryInterval and RecoverAfter time the recovery service. A purchase
// is settled only once older than RecoverAfter (or the checkout Timeout
// plus a minute), so a running charge is not raced.
const (
	RecoveryInterval = 30 * time.Second
	RecoverAfter     = 2 * time.Minute
)

// The variables of the flow.
const (
	VarNotifyURL          = "DROPSTREAM_COMIC_NOTIFY_URL"
	VarNotifySecret       = "DROPSTREAM_COMIC_NOTIFY_SECRET"
	VarQuotaSubscriptions = "DROPSTREAM_QUOTA_COMIC_SUBSCRIPTIONS"
	VarHoldWindow         = "DROPSTREAM_COMIC_HOLD_WINDOW"
	VarHoldWave           = "DROPSTREAM_COMIC_HOLD_WAVE"
)

// Vars are the flow's settings (see their Usage).
var Vars = []flow.Var{
	{Name: VarNotifyURL, Kind: flow.URL, Usage: "comic flow: POST /notify URL for subscriptions without their own; empty: such notifications go to the log channel"},
	{Name: VarNotifySecret, Secret: true, Usage: "comic flow: HMAC secret (at least 16 bytes) signing requests to DROPSTREAM_COMIC_NOTIFY_URL"},
	{Name: VarQuotaSubscriptions, Kind: flow.Int, Default: "1000", Usage: "comic subscriptions each API key (each client address on an open API) may create; beyond it 409 quota_exceeded; 0: no cap"},
	{Name: VarHoldWindow, Kind: flow.Duration, Default: "10m", Usage: "comic flow: how long a wave of subscribers told of a comic alone may buy it, when its listing sets no hold_seconds"},
	{Name: VarHoldWave, Kind: flow.Int, Default: "20", Usage: "comic flow: subscribers told per wave, 1..100"},
}

// Flow is the comic flow: subscriptions, inventory, the matching and
// delivery stages, and sales.
type Flow struct {
	Subscriptions *Store
	Inventory     *Inventory
	Matcher       *Matcher
	Delivery      *Delivery
	Holds         *Holds
	Sales         *Sales // nil without Payments
	topics        Topics
	checkout      *checkout.Flow // nil when built by NewWith
	// relayTopic is where Delivery relays, sentTopic the notifier's
	// history of the sends; nil when built by NewWith.
	relayTopic, sentTopic *stream.Topic
	ch                    *clickhouse.Client
	log                   *slog.Logger
	egress                *egress.Policy
	subCap                *quota.Quota
}

// New builds the flow (flow.Flow): it charges through the checkout flow
// and relays to the notifier, both built first, else flow.ErrNotBuilt.
func New(_ context.Context, d flow.Deps) (*Flow, error) {
	co, err := flow.Find[*checkout.Flow](d.Flows, checkout.Name)
	if err != nil {
		return nil, fmt.Errorf("comic: %w", err)
	}
	nf, err := flow.Find[*notifier.Flow](d.Flows, notifier.Name)
	if err != nil {
		return nil, fmt.Errorf("comic: %w", err)
	}
	if err := nf.RegisterKind(NotifyKind()); err != nil {
		return nil, fmt.Errorf("comic: %w", err)
	}
	policy := d.Settings.EgressPolicy()
	notifyURL, err := policy.NormalizeURL(d.Settings.String(VarNotifyURL))
	if err != nil {
		return nil, fmt.Errorf("comic: %s: %w (list its host in DROPSTREAM_EGRESS_ALLOW)", VarNotifyURL, err)
	}
	cfg := Config{Partitions: d.Settings.Partitions, Webhook: notifier.WebhookSettings(d.Settings, policy), Delivery: DeliveryConfig{
		NotifyURL: notifyURL, NotifySecret: d.Settings.String(VarNotifySecret), Relay: nf.Notify},
		MaxSubscriptionsPerCaller: d.Settings.Int(VarQuotaSubscriptions),
		Holds:                     HoldConfig{Window: d.Settings.Duration(VarHoldWindow), WaveSize: d.Settings.Int(VarHoldWave)}}
	f, err := NewWith(d.Redis, cfg, NewCheckoutPayments(d.Redis, co), d.Telemetry)
	if err != nil {
		return nil, err
	}
	requests, sent := nf.Topics().Requests, nf.Topics().History
	f.checkout, f.relayTopic, f.sentTopic, f.ch = co, &requests, &sent, d.ClickHouse
	return f, nil
}

// NewWith builds the flow over rdb, delivering through its own Dispatcher;
// payments may be nil (no sales).
func NewWith(rdb redis.UniversalClient, cfg Config, payments Payments, tel stream.Telemetry) (*Flow, error) {
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
	logger := cmp.Or(tel.Logger, slog.Default())
	cfg.Webhook.Egress = cmp.Or(cfg.Webhook.Egress, egress.Default())
	channels, err := notifier.NewChannels(cfg.Webhook, logger)
	if err != nil {
		return nil, err
	}
	disp, err := notifier.NewDispatcher(ledger, channels, tel)
	if err != nil {
		return nil, err
	}
	holds := newHolds(rdb, topics, cfg.Holds, tel.Propagator)
	s := &Flow{topics: topics, Subscriptions: store, Holds: holds, log: logger, egress: cfg.Webhook.Egress,
		Inventory: &Inventory{rdb: rdb, topics: topics, prop: tel.Propagator, now: time.Now},
		Delivery:  &Delivery{rdb: rdb, topics: topics, store: store, d: disp, cfg: cfg.Delivery, now: time.Now},
		Matcher:   NewMatcher(rdb, topics, &streamHandoff{rdb: rdb, topics: topics, prop: tel.Propagator, holds: holds}, tel.Propagator)}
	if payments != nil {
		s.Sales = &Sales{rdb: rdb, topics: topics, payments: payments, ledgerKey: ledger.Key, now: time.Now}
	}
	q, err := quota.Optional(rdb, "comic-subscriptions", cfg.MaxSubscriptionsPerCaller)
	if err != nil {
		return nil, err
	}
	// A subscription removed by its unsubscribe link frees its slot.
	s.subCap = q.WithExists(func(ctx context.Context, id string) (bool, error) {
		_, err := store.Get(ctx, id)
		if errors.Is(err, ErrNotFound) {
			return false, nil
		}
		return err == nil, err
	})
	return s, nil
}

// SubscriptionQuota is the cap of subscriptions per caller; nil: none.
func (s *Flow) SubscriptionQuota() *quota.Quota { return s.subCap }

// Topics returns the flow's topics.
func (s *Flow) Topics() Topics { return s.topics }

// Egress is the webhook channel's outbound policy; the routes refuse a
// notify_url it denies.
func (s *Flow) Egress() *egress.Policy { return s.egress }

// Stages returns the matching and delivery stages, and StageHoldSent
// when Delivery relays.
func (s *Flow) Stages() []stream.Stage {
	out := []stream.Stage{s.Matcher.Stage(), s.Delivery.Stage()}
	if s.sentTopic != nil {
		out = append(out, s.Holds.sentStage(*s.sentTopic))
	}
	return out
}

// Describe declares the flow's stages, services, history, topics and demo.
func (s *Flow) Describe() flow.Description {
	t := s.topics
	d := flow.Description{
		Stages: s.Stages(),
		Edges: []flow.Edge{
			{From: StageMatcher, Topic: t.Notify}, {From: ServiceWaves, Topic: t.Notify},
			{From: StageDelivery, Topic: t.Events},
			{From: flow.FromAPI, Topic: t.Jobs}, {From: flow.FromAPI, Topic: t.Events},
		},
		History: []flow.History{flowhistory.Of(s.HistoryConfig(), stream.Telemetry{Logger: s.log})},
		Services: []flow.Service{{Name: ServiceWaves, Run: func(ctx context.Context) error {
			tick.EveryAfter(ctx, s.Holds.cfg.Poll, func() {
				if _, err := s.Holds.Advance(ctx); err != nil && ctx.Err() == nil {
					s.log.Warn("comic: telling the next waves failed; retrying", "error", err)
				}
			})
			return nil
		}}},
		Demo: s.SeedDemo,
	}
	if s.relayTopic != nil {
		d.Edges = append(d.Edges, flow.Edge{From: StageDelivery, Topic: *s.relayTopic})
	}
	if s.checkout != nil {
		// A purchase begins a checkout attempt, or gives it up.
		co := s.checkout.Topics()
		d.Edges = append(d.Edges, flow.Edge{From: flow.FromAPI, Topic: co.Stock},
			flow.Edge{From: flow.FromAPI, Topic: co.Payment}, flow.Edge{From: flow.FromAPI, Topic: co.Sagas})
	}
	if s.Sales != nil {
		d.Services = append(d.Services, flow.Service{Name: ServiceRecovery, Run: s.runRecovery})
		d.Edges = append(d.Edges, flow.Edge{From: ServiceRecovery, Topic: t.Events})
	}
	if s.ch != nil {
		d.Services = append(d.Services, flow.Service{Name: ServiceStatsSnapshot, Run: func(ctx context.Context) error {
			tick.Every(ctx, time.Minute, func() {
				if err := SnapshotStats(ctx, s.ch, s.Subscriptions, time.Now()); err != nil && ctx.Err() == nil {
					s.log.Warn("comic: statistics snapshot failed; retrying in a minute", "error", err)
				}
			})
			return nil
		}})
	}
	return d
}

// runRecovery settles purchases in doubt every RecoveryInterval.
func (s *Flow) runRecovery(ctx context.Context) error {
	after := RecoverAfter
	if s.checkout != nil {
		after = max(after, s.checkout.Config().Timeout+time.Minute)
	}
	tick.EveryAfter(ctx, RecoveryInterval, func() {
		if n, err := s.Sales.Recover(ctx, after); err != nil {
			s.log.Warn("comic: settling purchases in doubt failed; retrying", "settled", n, "error", err)
		} else if n > 0 {
			s.log.Info("comic: purchases in doubt settled", "settled", n)
		}
	})
	return nil
}

// Close releases nothing: the flow holds only what the app gave it.
func (s *Flow) Close() error { return nil }

// DemoSubscriptions are the subscriptions SeedDemo creates.
var DemoSubscriptions = []struct {
	Email string
	Body  string
}{
	{"peter@example.com", `{"publisher":"Marvel","series":"The Amazing Spider-Man"}`},
	{"bruce@example.com", `{"key_issue":true,"publisher":"DC"}`},
}

// SeedDemo creates the demo subscriptions; existing ones are kept.
func (s *Flow) SeedDemo(ctx context.Context) error {
	for _, d := range DemoSubscriptions {
		_, err := s.Subscriptions.Create(ctx, d.Email, json.RawMessage(d.Body), "")
		if err != nil && !errors.Is(err, ErrDuplicate) {
			return fmt.Errorf("comic: demo subscription: %w", err)
		}
	}
	return nil
}
