package feed

import (
	"context"
	"log/slog"

	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/subscriber"
	"github.com/dropstream/dropstream/writer/flowhistory"
)

// ServicePoller names the feed polling loop among the services.
const ServicePoller = "feed-poller"

// New builds the feed flow over the app's dependencies, with its poller
// service; it implements flow.Flow. The links of its messages start with
// d.Settings.PublicURL.
//
// The flow builds its collaborators in the notifier (see Deps) over the
// app's Redis: the subscriber store, a delivery ledger and the log and
// webhook channels behind a dispatcher for log destinations, and a
// publisher of notifier requests to notify.requests, which the
// "notifier-deliver" stage reads. Their Redis keys are the notifier's, so
// they act as the notifier's own.
func New(_ context.Context, d flow.Deps) (*Flow, error) {
	log := d.Telemetry.Logger
	if log == nil {
		log = slog.Default()
	}
	// Once the notifier is a flow, these pieces come from it instead:
	// n, err := flow.Find[*notifier.Flow](d.Flows, notifier.Name), then its
	// subscriber store, its dispatcher (ledger and channels) and its
	// request publisher.
	ledger, err := notifier.NewDeliveryLedger(d.Redis, notifier.DeliveryLedgerConfig{})
	if err != nil {
		return nil, err
	}
	channels, err := notifier.NewChannels(notifier.WebhookConfig{}, log)
	if err != nil {
		return nil, err
	}
	dispatcher, err := notifier.NewDispatcher(ledger, channels, d.Telemetry)
	if err != nil {
		return nil, err
	}
	subs, err := subscriber.NewStore(d.Redis, subscriber.StoreConfig{Logger: log})
	if err != nil {
		return nil, err
	}
	requests := notifier.RequestTopic(d.Settings.Partitions)
	notify := func(ctx context.Context, reqs ...notifier.Request) error {
		return notifier.PublishRequests(ctx, d.Publisher, requests, reqs...)
	}
	f, err := NewWith(d.Redis, d.Publisher, Deps{Subscribers: subs, Notify: notify, Sender: dispatcher},
		Config{Partitions: d.Settings.Partitions, PublicURL: d.Settings.PublicURL, Logger: log, MeterProvider: d.Telemetry.MeterProvider})
	if err != nil {
		return nil, err
	}
	if f.poller, err = f.NewPoller(PollerConfig{}); err != nil {
		return nil, err
	}
	f.tel = d.Telemetry
	return f, nil
}

// Describe declares the assignment and delivery stages, the poller service
// (a flow built by New), the history appended to ClickHouse, the topics
// each part publishes to, and the demo feed.
func (f *Flow) Describe() flow.Description {
	requests := notifier.RequestTopic(f.cfg.Partitions)
	d := flow.Description{
		Stages: f.Stages(),
		Edges: []flow.Edge{
			{From: StageAssign, Topic: f.topics.Collections},
			{From: StageAssign, Topic: f.topics.History},
			{From: StageDeliver, Topic: f.topics.History},
			{From: StageDeliver, Topic: requests},
			// Excluding an item and removing a subscribable write history;
			// a subscription to confirm requests its opt-in message.
			{From: flow.FromAPI, Topic: f.topics.History},
			{From: flow.FromAPI, Topic: requests},
		},
		History: []flow.History{f.History()},
		Demo:    f.Demo,
	}
	if f.poller != nil {
		d.Services = []flow.Service{{Name: ServicePoller, Run: f.poller.Run}}
		d.Edges = append(d.Edges, flow.Edge{From: ServicePoller, Topic: f.topics.Polls})
	}
	return d
}

// History is the flow's ClickHouse append: the "feed-history" stage over
// feed.history into feed_item_events, through the writer (HistoryConfig).
func (f *Flow) History() flow.History { return flowhistory.Of(f.HistoryConfig(), f.tel) }

// Close releases nothing: the flow holds only what the app gave it, and
// the demo feed's server stops with the demo's context.
func (f *Flow) Close() error { return nil }
