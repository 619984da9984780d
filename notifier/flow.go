package notifier

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/internal/egress"
	"github.com/dropstream/dropstream/internal/quota"
	"github.com/dropstream/dropstream/internal/tenancy"
	"github.com/dropstream/dropstream/internal/tick"
	"github.com/dropstream/dropstream/notifier/email"
	"github.com/dropstream/dropstream/notifier/history"
	"github.com/dropstream/dropstream/notifier/subscriber"
	"github.com/dropstream/dropstream/notifier/throttle"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer/flowhistory"
)

// Name is the notifier flow's name: the prefix of its stages and services.
const Name = "notifier"

// The flow's stages and services.
const (
	// StageDeliver delivers the requests of notify.requests.
	StageDeliver = "notifier-deliver"
	// StageHistory appends notify.history to ClickHouse.
	StageHistory = history.StageName
	// ExpiryService removes expired unconfirmed destinations.
	ExpiryService = "notifier-expiry"
)

// VarQuotaSubscribers bounds the subscribers each caller may create.
const VarQuotaSubscribers = "DROPSTREAM_QUOTA_SUBSCRIBERS"

// VarWebhookLegacySignature, when true, adds the X-Dropstream headers of
// earlier releases to every webhook (WebhookConfig.LegacySignature).
const VarWebhookLegacySignature = "DROPSTREAM_WEBHOOK_LEGACY_SIGNATURE"

// Vars are the notifier's variables: the email channel (off without
// DROPSTREAM_SMTP_ADDR), sends in flight per deliver copy, legacy headers.
var Vars = []flow.Var{
	{Name: "DROPSTREAM_SMTP_ADDR", Usage: "SMTP server host:port of the notifier's email channel (STARTTLS required; on a loopback or private address, list it in DROPSTREAM_EGRESS_ALLOW); empty: no email channel"},
	{Name: "DROPSTREAM_SMTP_FROM", Usage: "sender address of notification emails (required with DROPSTREAM_SMTP_ADDR)"},
	{Name: "DROPSTREAM_SMTP_USERNAME", Usage: "SMTP AUTH PLAIN user name; empty: no authentication"},
	{Name: "DROPSTREAM_SMTP_PASSWORD", Secret: true, Usage: "SMTP AUTH password"},
	{Name: VarQuotaSubscribers, Kind: flow.Int, Default: "1000", Usage: "subscribers each API key (each client address on an open API) may create; beyond it 409 quota_exceeded; 0: no cap"},
	{Name: "DROPSTREAM_NOTIFIER_MAX_IN_FLIGHT", Kind: flow.Int, Usage: "notifier: sends in flight at once per notifier-deliver copy; a copy sends at most this many ÷ the receivers' answer time per second (default 64)"},
	{Name: VarWebhookLegacySignature, Kind: flow.Bool, Default: "false", Usage: "true: webhooks also carry the X-Dropstream-Signature and X-Dropstream-Event-Id headers of earlier releases, for receivers not yet verifying the Standard Webhooks headers (webhook-id, webhook-timestamp, webhook-signature), which are always sent"},
}

// Topics are the notifier's topics.
type Topics struct {
	// Requests is notify.requests, where flows publish requests (Flow.Notify).
	Requests stream.Topic
	// History is notify.history, every delivery's record (see StageHistory).
	History stream.Topic
}

// NewTopics returns the notifier's topics over partitions partitions.
func NewTopics(partitions int) Topics {
	return Topics{Requests: RequestTopic(partitions), History: history.Topic(partitions)}
}

// Flow is the generic notifier: StageDeliver, StageHistory and the digest,
// retry and expiry services. It knows no other flow; flows publish with
// Notify and add destination kinds with RegisterKind.
type Flow struct {
	owners    owners // registered by RegisterOwners
	topics    Topics
	pub       *stream.Publisher
	subs      *subscriber.Store
	subCap    *quota.Quota
	hist      *history.Recorder
	deliverer *Deliverer
	channels  map[string]Channel
	publicURL string
	ch        *clickhouse.Client
	logger    *slog.Logger
	tel       stream.Telemetry
	egress    *egress.Policy
	rdb       redis.UniversalClient // read by Events
}

// New builds the notifier; it implements flow.Flow. It reads Vars from
// d.Settings.
func New(_ context.Context, d flow.Deps) (*Flow, error) {
	logger := cmp.Or(d.Telemetry.Logger, slog.Default())
	f := &Flow{topics: NewTopics(d.Settings.Partitions), pub: d.Publisher, ch: d.ClickHouse, logger: logger, tel: d.Telemetry,
		egress: d.Settings.EgressPolicy(), rdb: d.Redis}
	var err error
	if f.subCap, err = d.Settings.Quota(d.Redis, VarQuotaSubscribers, "subscribers"); err != nil {
		return nil, err
	}
	if f.subs, err = subscriber.NewStore(d.Redis, subscriber.StoreConfig{Logger: logger, Quota: f.subCap}); err != nil {
		return nil, err
	}
	if f.hist, err = history.NewRecorder(d.Redis, d.Publisher, history.Config{Partitions: d.Settings.Partitions}); err != nil {
		return nil, err
	}
	th, err := throttle.New(d.Redis, throttle.Config{})
	if err != nil {
		return nil, err
	}
	if f.channels, err = newChannels(d.Settings, f.egress, logger); err != nil {
		return nil, err
	}
	cfg := DeliverConfig{PublicURL: d.Settings.PublicURL, MaxInFlight: d.Settings.Int("DROPSTREAM_NOTIFIER_MAX_IN_FLIGHT")}
	f.publicURL = cfg.WithDefaults().PublicURL
	f.deliverer, err = NewDeliverer(d.Redis, f.topics.Requests, DeliverDeps{Subscribers: f.subs, Channels: f.channels, Throttle: th,
		History: f.hist, Publisher: d.Publisher}, cfg, d.Telemetry)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// WebhookSettings is the webhook channel's configuration from the settings,
// connecting through policy.
func WebhookSettings(s flow.Settings, policy *egress.Policy) WebhookConfig {
	return WebhookConfig{Egress: policy, LegacySignature: s.Bool(VarWebhookLegacySignature)}
}

// newChannels are webhook, slack, log, and email when DROPSTREAM_SMTP_ADDR
// is set, each connecting through policy.
func newChannels(s flow.Settings, policy *egress.Policy, logger *slog.Logger) (map[string]Channel, error) {
	channels, err := NewChannels(WebhookSettings(s, policy), logger)
	if err != nil {
		return nil, err
	}
	channels[ChannelSlack] = NewSlackChannel(channels[ChannelWebhook].(*WebhookChannel))
	if addr := s.String("DROPSTREAM_SMTP_ADDR"); addr != "" {
		mail, err := email.New(email.Config{Addr: addr, From: s.String("DROPSTREAM_SMTP_FROM"),
			Username: s.String("DROPSTREAM_SMTP_USERNAME"), Password: s.String("DROPSTREAM_SMTP_PASSWORD"), Egress: policy})
		if err != nil {
			return nil, fmt.Errorf("DROPSTREAM_SMTP_*: %w", err)
		}
		channels[email.ChannelName] = mail
	}
	return channels, nil
}

// Topics are the notifier's topics.
func (f *Flow) Topics() Topics { return f.topics }

// Notify validates reqs and publishes them to notify.requests in the trace
// of ctx; each is delivered once per (subscriber, destination, subject,
// window). Errors wrap ErrInvalidRequest for an undeliverable request.
func (f *Flow) Notify(ctx context.Context, reqs ...Request) error {
	return PublishRequests(ctx, f.pub, f.topics.Requests, reqs...)
}

// Subscribers is the subscriber store.
func (f *Flow) Subscribers() *subscriber.Store { return f.subs }

// SubscriberQuota is the cap of subscribers per caller
// (DROPSTREAM_QUOTA_SUBSCRIBERS); nil: none.
func (f *Flow) SubscriberQuota() *quota.Quota { return f.subCap }

// History records what the notifier did with every notification.
func (f *Flow) History() *history.Recorder { return f.hist }

// Channels returns the notifier's channels by name (a new map each call):
// webhook, slack, log, and email when configured.
func (f *Flow) Channels() map[string]Channel { return maps.Clone(f.channels) }

// Dispatcher is the deliver stage's dispatcher, for a flow that sends in
// process: once per business key through the ledger and channels.
func (f *Flow) Dispatcher() *Dispatcher { return f.deliverer.dispatch }

// Egress is the policy of the channels' outbound connections.
func (f *Flow) Egress() *egress.Policy { return f.egress }

// PublicURL is the base of the links in messages (opt-in, unsubscribe).
func (f *Flow) PublicURL() string { return f.publicURL }

// ClickHouse is the app's ClickHouse client; nil without ClickHouse.
func (f *Flow) ClickHouse() *clickhouse.Client { return f.ch }

// RegisterKind adds a destination kind sent by channel k.Channel. Call it
// from a flow's New; registering the same kind again does nothing.
func (f *Flow) RegisterKind(k subscriber.Kind) error {
	if _, ok := f.channels[k.Channel]; !ok {
		return fmt.Errorf("notifier: kind %q: no channel %q", k.Name, k.Channel)
	}
	if err := subscriber.RegisterKind(k); err != nil {
		return fmt.Errorf("notifier: %w", err)
	}
	return nil
}

// SignedJSONKind is a webhook-like kind: signed JSON to an http(s) URL.
func SignedJSONKind(name string) subscriber.Kind {
	return subscriber.Kind{Name: name, Channel: ChannelWebhook, Core: subscriber.URLCore, Secret: true}
}

// Describe declares the stages, services and the topics each publishes.
func (f *Flow) Describe() flow.Description {
	partitions := f.topics.Requests.Partitions
	return flow.Description{
		Stages:  []stream.Stage{f.deliverer.Stage()},
		History: []flow.History{flowhistory.Of(history.AppendConfig(partitions, stream.RunnerConfig{}), f.tel)},
		Services: []flow.Service{
			{Name: DigestService, Run: f.deliverer.RunDigests},
			{Name: RetryService, Run: f.deliverer.RunRetries},
			{Name: ExpiryService, Run: f.runExpiry},
		},
		Edges: []flow.Edge{
			{From: StageDeliver, Topic: f.topics.History},
			{From: DigestService, Topic: f.topics.Requests},
			{From: RetryService, Topic: f.topics.Requests},
			{From: flow.FromAPI, Topic: f.topics.Requests},
		},
		Events: f.events,
	}
}

// Close releases nothing: the flow holds only what the app gave it.
func (f *Flow) Close() error { return nil }

// runExpiry removes expired unconfirmed destinations every minute.
func (f *Flow) runExpiry(ctx context.Context) error {
	tick.Every(ctx, time.Minute, func() {
		n, err := f.subs.ExpireUnconfirmed(ctx, time.Now(), 1000)
		if err != nil && ctx.Err() == nil {
			f.logger.Warn("notifier: expiring unconfirmed destinations failed", "error", err)
		} else if n > 0 {
			f.logger.Info("notifier: unconfirmed destinations expired", "count", n)
		}
	})
	return nil
}

// Cause finds the transition and run that caused a notification, from
// ClickHouse; without ClickHouse it fails.
func (f *Flow) Cause(ctx context.Context, eventID, runID string) (clickhouse.Cause, error) {
	if f.ch == nil {
		return clickhouse.Cause{}, errors.New("notifier: no ClickHouse")
	}
	return clickhouse.NotificationCause(ctx, f.ch, eventID, runID)
}

// OwnerLookup returns the tenant of a flow's own recipient and whether the
// id is known.
type OwnerLookup func(ctx context.Context, id string) (tenant string, found bool, err error)

// owners are the lookups flows registered, beside the subscribers'.
type owners struct {
	mu      sync.RWMutex
	lookups []OwnerLookup
}

// RegisterOwners adds a lookup of a flow's own recipients' tenants, so a
// notification shows only to its tenant. Call it from a flow's New.
func (f *Flow) RegisterOwners(l OwnerLookup) {
	f.owners.mu.Lock()
	defer f.owners.mu.Unlock()
	f.owners.lookups = append(f.owners.lookups, l)
}

// OwnerOf returns the tenant of recipient id; tenancy.Open if unknown.
func (f *Flow) OwnerOf(ctx context.Context, id string) (string, error) {
	if subscriber.ValidSubscriberID(id) {
		s, err := f.Subscribers().Resolve(ctx, id)
		switch {
		case errors.Is(err, subscriber.ErrNotFound):
			return tenancy.Open, nil
		case err != nil:
			return "", fmt.Errorf("notifier: owner of %s: %w", id, err)
		}
		return tenancy.Of(s.Tenant), nil
	}
	f.owners.mu.RLock()
	lookups := f.owners.lookups
	f.owners.mu.RUnlock()
	for _, l := range lookups {
		tenant, found, err := l(ctx, id)
		if err != nil {
			return "", fmt.Errorf("notifier: owner of %s: %w", id, err)
		}
		if found {
			return tenancy.Of(tenant), nil
		}
	}
	return tenancy.Open, nil
}

// events lists the newest notification records in the history stream,
// with their cause (Description.Events).
func (f *Flow) events(ctx context.Context, v tenancy.View, limit int) ([]flow.Event, error) {
	entries, err := flow.Recent(ctx, f.rdb, f.topics.History, flow.ScanFor(v, limit))
	if err != nil {
		return nil, err
	}
	var out []flow.Event
	owners := map[string]string{} // recipient id → tenant, read once per call
	for _, e := range entries {
		recs, err := history.Records(e.ID, e.Type, e.Payload)
		if err != nil {
			continue
		}
		// A message's records are in the order they happened: newest last.
		for i := len(recs) - 1; i >= 0; i-- {
			if !v.All {
				owner, ok := owners[recs[i].SubscriberID]
				if !ok {
					if owner, err = f.OwnerOf(ctx, recs[i].SubscriberID); err != nil {
						return nil, err
					}
					owners[recs[i].SubscriberID] = owner
				}
				if !v.Sees(owner) {
					continue
				}
			}
			out = append(out, notificationEvent(recs[i]))
			if len(out) == limit {
				return out, nil
			}
		}
	}
	return out, nil
}

// notificationEvent describes one history record as an event.
func notificationEvent(r history.Record) flow.Event {
	ev := flow.Event{Kind: "notification", ID: r.ID, Time: r.At, Subject: r.SubscriberID + " via " + r.Channel,
		Summary: r.Status + ": " + r.Subject, TraceID: r.TraceID}
	if r.Error != "" {
		ev.Summary += " (" + r.Error + ")"
	}
	if r.EventID != "" {
		ev.Cause = append(ev.Cause, flow.Ref{Kind: r.Flow + " event", ID: r.EventID})
	}
	if r.RunID != "" {
		ev.Cause = append(ev.Cause, flow.Ref{Kind: "run", ID: r.RunID})
	}
	return ev
}
