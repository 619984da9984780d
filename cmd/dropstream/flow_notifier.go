package main

import (
	"context"
	"fmt"
	"time"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/email"
	"github.com/dropstream/dropstream/notifier/history"
	"github.com/dropstream/dropstream/notifier/subscriber"
	"github.com/dropstream/dropstream/notifier/throttle"
	"github.com/dropstream/dropstream/stream"
)

// expiryService names the loop that removes unconfirmed destinations.
const expiryService = "notifier-expiry"

// buildNotifier wires the generic notifier: the "notifier-deliver" stage
// over notify.requests (every flow publishes notifier.Request there), the
// "notifier-history" stage into ClickHouse (idle without it: its backlog
// waits in notify.history), the digest flusher, the retry scheduler and
// the expiry of unconfirmed destinations as services, and the subscriber
// and notification routes.
//
// Environment: DROPSTREAM_PUBLIC_URL (base of the links in messages,
// default http://localhost:8080); DROPSTREAM_SMTP_ADDR, _FROM, _USERNAME,
// _PASSWORD (the email channel, off when DROPSTREAM_SMTP_ADDR is empty);
// DROPSTREAM_NOTIFIER_MAX_IN_FLIGHT (notifier.DeliverConfig.MaxInFlight).
// notifierVars are the variables of the notifier.
var notifierVars = []flow.Var{
	{Name: "DROPSTREAM_SMTP_ADDR", Usage: "SMTP server host:port of the notifier's email channel (STARTTLS required); empty: no email channel"},
	{Name: "DROPSTREAM_SMTP_FROM", Usage: "sender address of notification emails (required with DROPSTREAM_SMTP_ADDR)"},
	{Name: "DROPSTREAM_SMTP_USERNAME", Usage: "SMTP AUTH PLAIN user name; empty: no authentication"},
	{Name: "DROPSTREAM_SMTP_PASSWORD", Secret: true, Usage: "SMTP AUTH password"},
	{Name: "DROPSTREAM_NOTIFIER_MAX_IN_FLIGHT", Kind: flow.Int, Usage: "notifier: sends in flight at once per notifier-deliver copy; a copy sends at most this many ÷ the receivers' answer time per second (default 64)"},
}

func buildNotifier(ctx context.Context, a *app) (*cmdFlow, error) {
	f := &cmdFlow{}
	topic := notifier.RequestTopic(a.cfg.Partitions)
	subs, err := subscriber.NewStore(a.rdb, subscriber.StoreConfig{Logger: a.log})
	if err != nil {
		return nil, err
	}
	hist, err := newHistoryRecorder(a)
	if err != nil {
		return nil, err
	}
	th, err := throttle.New(a.rdb, throttle.Config{})
	if err != nil {
		return nil, err
	}
	channels, err := notifierChannels(a)
	if err != nil {
		return nil, err
	}
	cfg, err := deliverConfig(a.settings)
	if err != nil {
		return nil, err
	}
	d, err := notifier.NewDeliverer(a.rdb, topic, notifier.DeliverDeps{Subscribers: subs, Channels: channels, Throttle: th,
		History: hist, Publisher: a.pub}, cfg, a.tel)
	if err != nil {
		return nil, fmt.Errorf("notifier: %w", err)
	}
	partitions := a.cfg.Partitions
	f.desc = flow.Description{
		Stages: []stream.Stage{d.Stage()},
		History: []flow.History{{Tables: []string{"notifications"}, Groups: []flow.Group{{Topic: history.Topic(partitions), Name: history.StageName}},
			Open: func(_ context.Context, ch *clickhouse.Client) ([]stream.Stage, func() error, error) {
				hs, err := history.Stage(ch, partitions, stream.RunnerConfig{})
				return []stream.Stage{hs}, nil, err
			}}},
		Services: []flow.Service{
			{Name: notifier.DigestService, Run: d.RunDigests},
			{Name: notifier.RetryService, Run: d.RunRetries},
			{Name: expiryService, Run: func(ctx context.Context) error { return expiryLoop(ctx, a, subs) }},
		},
	}
	notify := func(ctx context.Context, reqs ...notifier.Request) error {
		return notifier.PublishRequests(ctx, a.pub, topic, reqs...)
	}
	ch := a.ch
	f.routes = func(srv *api.Server) {
		api.SubscriberRoutes{Store: subs, Notify: notify, PublicURL: cfg.PublicURL}.Register(srv)
		nr := api.NotificationRoutes{History: hist}
		if ch != nil {
			nr.Cause = func(ctx context.Context, eventID, runID string) (clickhouse.Cause, error) {
				return clickhouse.NotificationCause(ctx, ch, eventID, runID)
			}
		}
		nr.Register(srv)
	}
	return f, nil
}

// newHistoryRecorder is the history every notifier stage writes: recent
// records in Redis, every record on notify.history.
func newHistoryRecorder(a *app) (*history.Recorder, error) {
	return history.NewRecorder(a.rdb, a.pub, history.Config{Partitions: a.cfg.Partitions})
}

// notifierChannels are the channels of the generic notifier: webhook,
// slack, log, and email when DROPSTREAM_SMTP_ADDR is set.
func notifierChannels(a *app) (map[string]notifier.Channel, error) {
	channels, err := notifier.NewChannels(notifier.WebhookConfig{}, a.log)
	if err != nil {
		return nil, err
	}
	channels[notifier.ChannelSlack] = notifier.NewSlackChannel(channels[notifier.ChannelWebhook].(*notifier.WebhookChannel))
	if addr := a.settings.String("DROPSTREAM_SMTP_ADDR"); addr != "" {
		mail, err := email.New(email.Config{Addr: addr, From: a.settings.String("DROPSTREAM_SMTP_FROM"),
			Username: a.settings.String("DROPSTREAM_SMTP_USERNAME"), Password: a.settings.String("DROPSTREAM_SMTP_PASSWORD")})
		if err != nil {
			return nil, fmt.Errorf("notifier: DROPSTREAM_SMTP_*: %w", err)
		}
		channels[email.ChannelName] = mail
	}
	return channels, nil
}

// expiryLoop removes expired unconfirmed destinations every minute.
func expiryLoop(ctx context.Context, a *app, subs *subscriber.Store) error {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		n, err := subs.ExpireUnconfirmed(ctx, time.Now(), 1000)
		if err != nil && ctx.Err() == nil {
			a.log.Warn("notifier: expiring unconfirmed destinations failed", "error", err)
		} else if n > 0 {
			a.log.Info("notifier: unconfirmed destinations expired", "count", n)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// deliverConfig is the notifier-deliver stage's configuration from the
// settings.
func deliverConfig(s flow.Settings) (notifier.DeliverConfig, error) {
	cfg := notifier.DeliverConfig{PublicURL: s.PublicURL, MaxInFlight: s.Int("DROPSTREAM_NOTIFIER_MAX_IN_FLIGHT")}
	return cfg, cfg.WithDefaults().Validate()
}
