package feed

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/flows/feed/feedsim"
	"github.com/dropstream/dropstream/internal/quota"
	"github.com/dropstream/dropstream/internal/tick"
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

// The flow's variables: caps of what each caller (API key, or client
// address on an open API) may create.
const (
	VarQuotaFeeds         = "DROPSTREAM_QUOTA_FEEDS"
	VarQuotaSubscriptions = "DROPSTREAM_QUOTA_FEED_SUBSCRIPTIONS"
)

// Vars are the variables the flow reads.
var Vars = []flow.Var{
	{Name: VarQuotaFeeds, Kind: flow.Int, Default: "100", Usage: "feeds each API key (each client address on an open API) may add; beyond it 409 quota_exceeded; 0: no cap"},
	{Name: VarQuotaSubscriptions, Kind: flow.Int, Default: "1000", Usage: "feed subscriptions each API key (each client address on an open API) may create; beyond it 409 quota_exceeded; 0: no cap"},
}

// present maps a lookup's error to whether the record exists.
func present(err error) (bool, error) {
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// FeedQuota is the cap of feeds per caller; nil: none.
func (f *Flow) FeedQuota() *quota.Quota { return f.feedCap }

// SubscriptionQuota is the cap of subscriptions per caller; nil: none.
func (f *Flow) SubscriptionQuota() *quota.Quota { return f.subCap }

// DemoFeedPath is the path of the demo feed served in-process; demo feeds
// of earlier runs (other ports) are recognized by it and removed.
const DemoFeedPath = "/dropstream-demo-feed.xml"

// Demo serves an in-process feed gaining an item every 10 seconds, with a
// log subscription per item and per 3 items. It replaces earlier demo feeds.
func (f *Flow) Demo(ctx context.Context) error {
	st := f.store
	feeds, err := st.Feeds(ctx)
	if err != nil {
		return err
	}
	for _, fd := range feeds {
		if u, err := url.Parse(fd.URL); err == nil && u.Path == DemoFeedPath && u.Hostname() == "127.0.0.1" {
			subs, err := st.Subscribables(ctx, fd.ID)
			if err != nil {
				return err
			}
			for _, sb := range subs {
				if err := st.DeleteSubscribable(ctx, fd.ID, sb.Key()); err != nil {
					return err
				}
			}
			if err := st.DeleteFeed(ctx, fd.ID); err != nil {
				return err
			}
		}
	}
	items := []feedsim.Item{demoItem(1), demoItem(2)}
	sim := feedsim.New(feedsim.RSS, items...)
	base, err := feedsim.Serve(ctx, "127.0.0.1:0", sim)
	if err != nil {
		return err
	}
	// The poller may fetch this server, and no other loopback port.
	if u, err := url.Parse(base); err != nil {
		return err
	} else if err := f.cfg.Egress.Permit(u.Host); err != nil {
		return err
	}
	n := 2
	go tick.EveryAfter(ctx, 10*time.Second, func() {
		n++
		items = appendDemoItem(items, demoItem(n))
		sim.Set(items...)
	})
	fd, _, err := st.PutFeed(ctx, Feed{URL: base + DemoFeedPath, PollEvery: "5s", IncludeExisting: true})
	if err != nil {
		return err
	}
	managers := map[string]Manager{"demo-each": {Kind: EachItem}, "demo-every-3": {Kind: EveryN, N: 3}}
	for name, m := range managers {
		if _, _, err := st.PutSubscribable(ctx, Subscribable{FeedID: fd.ID, Name: name, Manager: m}); err != nil {
			return err
		}
		if _, _, err := f.Subscribe(ctx, fd.ID, name, Destination{Kind: DestLog, Name: "demo"}); err != nil {
			return err
		}
	}
	return nil
}

// demoFeedItems is how many items the demo feed shows: a document that
// grew for ever would be fetched and parsed whole at every poll.
const demoFeedItems = 20

// appendDemoItem appends it and keeps the latest demoFeedItems.
func appendDemoItem(items []feedsim.Item, it feedsim.Item) []feedsim.Item {
	items = append(items, it)
	return items[max(0, len(items)-demoFeedItems):]
}

func demoItem(n int) feedsim.Item {
	s := strconv.Itoa(n)
	return feedsim.Item{GUID: "demo-" + s, Title: "Demo item " + s, Link: "https://example.org/items/" + s,
		Description: "The demo feed's item number " + s + ".", Published: time.Now().UTC()}
}

// Metrics of polling etiquette, WebSub and duplicates, with bounded labels;
// per-feed figures live in the feed's record (Flow.Polling).
const (
	metricRequests   = "dropstream.feed.requests"
	metricBytes      = "dropstream.feed.response.bytes"
	metricSchedules  = "dropstream.feed.schedules"
	metricDuplicates = "dropstream.feed.duplicates.held"
	metricHalts      = "dropstream.feed.halts"
	metricWebSub     = "dropstream.feed.websub"
	metricMoved      = "dropstream.feed.moved"
)

func attrSet(k, v string) attribute.Set { return attribute.NewSet(attribute.String(k, v)) }

var (
	outcomeSets = attrSets("outcome", "ok", "not_modified", "error", "gone", "push")
	reasonSets  = attrSets("reason", ReasonInterval, ReasonAdaptive, ReasonFresh, ReasonTTL, ReasonSkip, ReasonPush, ReasonBackoff, ReasonRetryAfter)
)

// attrSets are the sets of attribute k for each of vs, by value.
func attrSets(k string, vs ...string) map[string]attribute.Set {
	out := make(map[string]attribute.Set, len(vs))
	for _, v := range vs {
		out[v] = attrSet(k, v)
	}
	return out
}

// initMetrics creates the flow's instruments.
func (f *Flow) initMetrics(meter metric.Meter) error {
	var errs []error
	counter := func(name, desc, unit string) metric.Int64Counter {
		c, err := meter.Int64Counter(name, metric.WithDescription(desc), metric.WithUnit(unit))
		errs = append(errs, err)
		return c
	}
	f.guidWarnings = counter("dropstream.feed.guid_warnings", "Feed items with a missing guid (synthesized from link and title) or a duplicate guid (dropped).", "{item}")
	f.items = counter("dropstream.feed.items", "Feed item steps: new, edited, assigned.", "{item}")
	f.collections = counter("dropstream.feed.collections", "Collections completed and forwarded, and delivered.", "{collection}")
	f.requests = counter(metricRequests, "Feed fetches by outcome (ok, not_modified, error, gone) and contents pushed by WebSub hubs (push).", "{request}")
	f.bytes = counter(metricBytes, "Body bytes of feed answers and pushes (decompressed).", "By")
	f.schedules = counter(metricSchedules, "Next polls scheduled, by what chose the delay (interval, adaptive, fresh, ttl, skip, push, backoff, retry_after).", "{poll}")
	f.held = counter(metricDuplicates, "New feed items held back as duplicates: the canonical link and content of an item already seen under another guid.", "{item}")
	f.halts = counter(metricHalts, "Feeds no longer polled, by state: gone (410) or dead (consecutive failures).", "{feed}")
	f.websubEvents = counter(metricWebSub, "WebSub steps: subscribe (requested of a hub), verified, denied, pushed, rejected (bad signature or body).", "{event}")
	f.moved = counter(metricMoved, "Feeds whose URL was updated after a permanent redirect (301, 308).", "{feed}")
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// Every series of a bounded set starts at 0, so dashboards and alerts
	// see the rare ones (a halt, a push) as 0 before the first happens.
	for c, sets := range map[*metric.Int64Counter]map[string]attribute.Set{&f.requests: outcomeSets, &f.schedules: reasonSets,
		&f.halts: attrSets("state", FeedGone, FeedDead), &f.websubEvents: attrSets("event", "subscribe", "verified", "denied", "pushed", "rejected"),
		&f.bytes: {"": {}}, &f.held: {"": {}}, &f.moved: {"": {}}} {
		for _, set := range sets {
			(*c).Add(context.Background(), 0, metric.WithAttributeSet(set))
		}
	}
	return nil
}
