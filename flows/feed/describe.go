package feed

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"

	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/writer/flowhistory"
)

// ServicePoller names the feed polling loop among the services.
const ServicePoller = "feed-poller"

// New builds the feed flow and its poller; it needs the notifier flow's
// Deps, else it fails with an error wrapping flow.ErrNotBuilt.
func New(_ context.Context, d flow.Deps) (*Flow, error) {
	nf, err := flow.Find[*notifier.Flow](d.Flows, notifier.Name)
	if err != nil {
		return nil, fmt.Errorf("feed: %w", err)
	}
	log := cmp.Or(d.Telemetry.Logger, slog.Default())
	f, err := NewWith(d.Redis, d.Publisher, Deps{Subscribers: nf.Subscribers(), Notify: nf.Notify, Sender: nf.Dispatcher()},
		Config{Partitions: d.Settings.Partitions, PublicURL: d.Settings.PublicURL, Logger: log, MeterProvider: d.Telemetry.MeterProvider,
			Egress: d.Settings.EgressPolicy(), MaxFeedsPerCaller: d.Settings.Int(VarQuotaFeeds),
			MaxSubscriptionsPerCaller: d.Settings.Int(VarQuotaSubscriptions)})
	if err != nil {
		return nil, err
	}
	if f.poller, err = f.NewPoller(PollerConfig{}); err != nil {
		return nil, err
	}

	f.tel = d.Telemetry
	return f, nil
}

// Describe declares the assignment and delivery stages, the poller, the
// ClickHouse history, the topics and the demo feed.
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
			// Content a WebSub hub pushes to its callback is a Poll.
			{From: flow.FromAPI, Topic: f.topics.Polls},
		},
		History: []flow.History{flowhistory.Of(f.HistoryConfig(), f.tel)},
		Demo:    f.Demo,
	}
	if f.poller != nil {
		d.Services = []flow.Service{{Name: ServicePoller, Run: f.poller.Run}}
		d.Edges = append(d.Edges, flow.Edge{From: ServicePoller, Topic: f.topics.Polls})
	}
	return d
}

// Close releases nothing: the flow holds only what the app gave it, and
// the demo feed's server stops with the demo's context.
func (f *Flow) Close() error { return nil }
