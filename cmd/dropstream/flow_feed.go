package main

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/flows/feed"
	"github.com/dropstream/dropstream/flows/feed/feedsim"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/subscriber"
	"github.com/dropstream/dropstream/stream"
)

// feedPollerService names the feed polling loop among the services.
const feedPollerService = "feed-poller"

// demoFeedPath is the path of the demo feed served in-process; demo feeds
// of earlier runs (other ports) are recognized by it and removed.
const demoFeedPath = "/dropstream-demo-feed.xml"

// buildFeedFlow wires the feed flow (issue 8): the assignment and delivery
// stages, the history stage when ClickHouse is configured, the poller, the
// API and the demo feed.
func buildFeedFlow(ctx context.Context, a *app) (*cmdFlow, error) {
	ledger, err := notifier.NewDeliveryLedger(a.rdb, notifier.DeliveryLedgerConfig{})
	if err != nil {
		return nil, err
	}
	channels, err := notifier.NewChannels(notifier.WebhookConfig{}, a.log)
	if err != nil {
		return nil, err
	}
	dispatcher, err := notifier.NewDispatcher(ledger, channels, a.tel)
	if err != nil {
		return nil, err
	}
	public := a.settings.PublicURL
	// E-mail and webhook subscriptions are the notifier's subscribers:
	// their confirmation requests and collections go through its generic
	// request path ("notifier-deliver", flow_notifier.go), its opt-in and
	// unsubscribe links and its expiry of unconfirmed destinations; log
	// destinations through the dispatcher.
	subs, err := subscriber.NewStore(a.rdb, subscriber.StoreConfig{Logger: a.log})
	if err != nil {
		return nil, err
	}
	requests := notifier.RequestTopic(a.cfg.Partitions)
	notify := func(ctx context.Context, reqs ...notifier.Request) error {
		return notifier.PublishRequests(ctx, a.pub, requests, reqs...)
	}
	fl, err := feed.New(a.rdb, a.pub, feed.Deps{Subscribers: subs, Notify: notify, Sender: dispatcher},
		feed.Config{Partitions: a.cfg.Partitions, PublicURL: public, Logger: a.log, MeterProvider: a.tel.MeterProvider})
	if err != nil {
		return nil, fmt.Errorf("feed: %w", err)
	}
	poller, err := fl.NewPoller(feed.PollerConfig{})
	if err != nil {
		return nil, fmt.Errorf("feed poller: %w", err)
	}
	return &cmdFlow{desc: flow.Description{
		Stages:   fl.Stages(),
		Services: []flow.Service{{Name: feedPollerService, Run: poller.Run}},
		History: []flow.History{{Tables: []string{"feed_item_events"}, Groups: []flow.Group{{Topic: fl.Topics().History, Name: feed.StageHistory}},
			Open: func(_ context.Context, ch *clickhouse.Client) ([]stream.Stage, func() error, error) {
				return []stream.Stage{fl.HistoryStage(ch)}, nil, nil
			}}},
		Demo: func(ctx context.Context) error { return feedDemo(ctx, fl) },
	}, routes: func(srv *api.Server) { fl.Register(srv) }}, nil
}

// feedDemo serves a feed in-process that gains an item every 10 seconds,
// and subscribes a log destination (confirmed at once) to each item and to
// every 3 items. Demo feeds of earlier runs are removed first, so it is idempotent.
func feedDemo(ctx context.Context, fl *feed.Flow) error {
	st := fl.Store()
	feeds, err := st.Feeds(ctx)
	if err != nil {
		return err
	}
	for _, fd := range feeds {
		if u, err := url.Parse(fd.URL); err == nil && u.Path == demoFeedPath && u.Hostname() == "127.0.0.1" {
			subs, err := st.Subscribables(ctx, fd.ID)
			if err != nil {
				return err
			}
			for _, sb := range subs {
				if err := st.DeleteSubscribable(ctx, fd.ID, sb.Name); err != nil {
					return err
				}
			}
			if err := st.DeleteFeed(ctx, fd.ID); err != nil {
				return err
			}
		}
	}
	sim := feedsim.New(feedsim.RSS, demoItem(1), demoItem(2))
	base, err := feedsim.Serve(ctx, "127.0.0.1:0", sim)
	if err != nil {
		return err
	}
	go func() {
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for n := 3; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				sim.Add(demoItem(n))
			}
		}
	}()
	fd, _, err := st.PutFeed(ctx, feed.Feed{URL: base + demoFeedPath, PollEvery: "5s", IncludeExisting: true})
	if err != nil {
		return err
	}
	managers := map[string]feed.Manager{"demo-each": {Kind: feed.EachItem}, "demo-every-3": {Kind: feed.EveryN, N: 3}}
	for name, m := range managers {
		if _, _, err := st.PutSubscribable(ctx, feed.Subscribable{FeedID: fd.ID, Name: name, Manager: m}); err != nil {
			return err
		}
		if _, _, err := fl.Subscribe(ctx, fd.ID, name, feed.Destination{Kind: feed.DestLog, Name: "demo"}); err != nil {
			return err
		}
	}
	return nil
}

func demoItem(n int) feedsim.Item {
	s := strconv.Itoa(n)
	return feedsim.Item{GUID: "demo-" + s, Title: "Demo item " + s, Link: "https://example.org/items/" + s,
		Description: "The demo feed's item number " + s + ".", Published: time.Now().UTC()}
}
