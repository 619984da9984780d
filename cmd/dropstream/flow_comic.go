package main

import (
	"context"
	"fmt"
	"time"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/flows/checkout"
	"github.com/dropstream/dropstream/flows/comic"
	"github.com/dropstream/dropstream/flows/comic/comicapi"
	"github.com/dropstream/dropstream/flows/comic/comiccheckout"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/stream"
)

// comicRecoveryService names the loop that settles purchases left in
// doubt (a crash between charge and sale): every comicRecoveryInterval it
// settles those older than comicRecoverAfter, which stays above the
// checkout saga's wait so a purchase still running is not raced.
const (
	comicRecoveryService  = "comic-purchase-recovery"
	comicRecoveryInterval = 30 * time.Second
	comicRecoverAfter     = 2 * time.Minute
)

// comicStatsService names the loop that snapshots the subscription
// statistics into ClickHouse every minute.
const comicStatsService = "comic-stats-snapshot"

// buildComic wires the comic flow (seed 000): the matching and delivery
// stages, the ClickHouse history stage and statistics snapshots (with
// ClickHouse), the comic API and two demo subscriptions.
//
// DROPSTREAM_COMIC_NOTIFY_URL and DROPSTREAM_COMIC_NOTIFY_SECRET (listed by
// --help, config.go) name the
// flow's POST /notify destination for subscriptions without their own;
// when unset, those notifications go to the log channel. Notifications with
// a destination are handed to the notifier's request topic.
// comicVars are the variables of the comic flow.
var comicVars = []flow.Var{
	{Name: "DROPSTREAM_COMIC_NOTIFY_URL", Kind: flow.URL, Usage: "comic flow: POST /notify URL for subscriptions without their own; empty: such notifications go to the log channel"},
	{Name: "DROPSTREAM_COMIC_NOTIFY_SECRET", Secret: true, Usage: "comic flow: HMAC secret (at least 16 bytes) signing requests to DROPSTREAM_COMIC_NOTIFY_URL"},
}

func buildComic(ctx context.Context, a *app) (*cmdFlow, error) {
	requests := notifier.RequestTopic(a.cfg.Partitions)
	cfg := comic.Config{Partitions: a.cfg.Partitions, Delivery: comic.DeliveryConfig{
		NotifyURL: a.settings.String("DROPSTREAM_COMIC_NOTIFY_URL"), NotifySecret: a.settings.String("DROPSTREAM_COMIC_NOTIFY_SECRET"),
		// Notifications with a destination go through the notifier's
		// generic request path ("notifier-deliver", flow_notifier.go).
		Relay: func(ctx context.Context, reqs ...notifier.Request) error {
			return notifier.PublishRequests(ctx, a.pub, requests, reqs...)
		}}}
	// Purchases are charged through the checkout saga, whose stages the
	// checkout flow runs (flow_checkout.go); this process only needs a
	// waiter of its own for the checkout calls it makes.
	co, err := checkout.NewService(a.rdb, a.pub, checkout.Config{Partitions: a.cfg.Partitions}, a.tel)
	if err != nil {
		return nil, fmt.Errorf("comic: checkout: %w", err)
	}
	svc, err := comic.New(a.rdb, cfg, comiccheckout.New(a.rdb, co), a.tel)
	if err != nil {
		return nil, fmt.Errorf("comic: %w", err)
	}
	f := &cmdFlow{
		desc: flow.Description{
			Stages:   svc.Stages(),
			Demo:     svc.SeedDemo,
			Waiters:  []flow.Service{{Name: "comic-checkout-waiter", Run: co.Run}},
			Services: []flow.Service{{Name: comicRecoveryService, Run: func(ctx context.Context) error { return recoverPurchases(ctx, a, svc.Sales) }}},
			History: []flow.History{{Tables: []string{"comic_events", "comic_sessions"}, Groups: []flow.Group{{Topic: svc.Topics.Events, Name: comic.GroupHistory}},
				Open: func(_ context.Context, ch *clickhouse.Client) ([]stream.Stage, func() error, error) {
					return []stream.Stage{comic.NewHistory(ch, svc.Topics, svc.Subscriptions).Stage()}, nil, nil
				}}},
		},
		routes: func(srv *api.Server) { comicapi.Routes{Flow: svc}.Register(srv) },
	}
	if a.ch != nil {
		hist := comic.NewHistory(a.ch, svc.Topics, svc.Subscriptions)
		f.desc.Services = append(f.desc.Services, flow.Service{Name: comicStatsService, Run: func(ctx context.Context) error {
			return hist.RunSnapshots(ctx, time.Minute, func(err error) {
				a.log.Warn("comic: statistics snapshot failed; retrying in a minute", "error", err)
			})
		}})
	}
	return f, nil
}

// recoverPurchases settles purchases in doubt until ctx ends.
func recoverPurchases(ctx context.Context, a *app, sales *comic.Sales) error {
	tick := time.NewTicker(comicRecoveryInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if n, err := sales.Recover(ctx, comicRecoverAfter); err != nil {
			a.log.Warn("comic: settling purchases in doubt failed; retrying", "settled", n, "error", err)
		} else if n > 0 {
			a.log.Info("comic: purchases in doubt settled", "settled", n)
		}
	}
}
