// Package feedbench measures the feed flow end to end on Redis: feeds of
// 50 items served by a feed server in a process of its own, each polled
// once through the whole flow (poll, observe, assign, a digest every 10
// items, delivery, clear). `dropstream bench feed` runs it.
package feedbench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/dropstream/dropstream/flows/feed"
	"github.com/dropstream/dropstream/flows/feed/poll"
	"github.com/dropstream/dropstream/internal/benchstat"
	"github.com/dropstream/dropstream/internal/egress"
	"github.com/dropstream/dropstream/internal/progress"
	"github.com/dropstream/dropstream/internal/settings"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/subscriber"
	"github.com/dropstream/dropstream/stream"
)

// Config sizes a run. Zero fields take the documented defaults.
type Config struct {
	// Feeds of 50 items each. Default 10,000.
	Feeds int `flag:"feeds" default:"10000" range:"1..1000000" help:"feeds of 50 items"`
	// Pollers are the concurrent polls. Default 32.
	Pollers int `flag:"pollers" default:"32" range:"1..1024" help:"concurrent polls"`
	// Copies of each stage. Default 2.
	Copies int `flag:"copies" default:"2" range:"1..64" help:"copies of each stage"`
	// Partitions of the flow. Default 8.
	Partitions int `default:"8"`
	// Self runs the binary with args (flow.BenchEnv.Self): the feed server
	// runs apart (ServerArgs). Nil serves the feeds in this process, their
	// CPU then in its figure.
	Self func(args ...string) *exec.Cmd
	// Telemetry of the stages.
	Telemetry stream.Telemetry
	// Progress, when set, shows each phase.
	Progress *progress.Printer
}

// Result is what a run measured.
type Result struct {
	Items int
	// Elapsed runs from the first poll to the last item cleared; Polled
	// to the last poll published.
	Elapsed, Polled time.Duration
	// CPU is per item: this process (polls, parse, stages) and Redis.
	CPU benchstat.CPU
	// Definitions, Streams and State are Redis bytes per feed: its feed,
	// subscribable and subscription; everything after the run; what stays
	// once the streams are trimmed.
	Definitions, Streams, State int64
}

// countChannel counts the digests it is asked to send.
type countChannel struct{ n atomic.Int64 }

func (c *countChannel) Name() string { return notifier.ChannelLog }
func (c *countChannel) Send(context.Context, notifier.Notification) error {
	c.n.Add(1)
	return nil
}

// Run polls every feed once through the flow on rdb's empty database.
func Run(ctx context.Context, rdb redis.UniversalClient, cfg Config) (Result, error) {
	if err := settings.Prepare("feedbench", &cfg); err != nil {
		return Result{}, err
	}
	if err := benchstat.CheckEmpty(ctx, rdb, "feedbench"); err != nil {
		return Result{}, err
	}
	base, stop, err := feedServer(cfg.Self)
	if err != nil {
		return Result{}, err
	}
	defer stop()
	ch := &countChannel{}
	ledger, err := notifier.NewDeliveryLedger(rdb, notifier.DeliveryLedgerConfig{})
	if err != nil {
		return Result{}, err
	}
	disp, err := notifier.NewDispatcher(ledger, map[string]notifier.Channel{notifier.ChannelLog: ch}, cfg.Telemetry)
	if err != nil {
		return Result{}, err
	}
	subs, err := subscriber.NewStore(rdb, subscriber.StoreConfig{})
	if err != nil {
		return Result{}, err
	}
	pub := stream.NewPublisher(rdb, cfg.Telemetry)
	notify := func(ctx context.Context, reqs ...notifier.Request) error {
		return notifier.PublishRequests(ctx, pub, notifier.RequestTopic(cfg.Partitions), reqs...)
	}
	// The feeds share one loopback host: its spacing is the least the pacer
	// allows (1ms), and the egress policy lets the fetches reach it.
	fl, err := feed.NewWith(rdb, pub, feed.Deps{Subscribers: subs, Notify: notify, Sender: disp}, feed.Config{Partitions: cfg.Partitions,
		Etiquette: feed.EtiquetteConfig{HostSpacing: time.Millisecond}, Logger: cfg.Telemetry.Logger})
	if err != nil {
		return Result{}, err
	}
	allow, err := egress.New(egress.Config{Allow: []string{strings.TrimPrefix(base, "http://")}})
	if err != nil {
		return Result{}, err
	}
	poller, err := fl.NewPoller(feed.PollerConfig{Fetch: poll.Config{RatePerHost: 1e6, Burst: 1000, Egress: allow}})
	if err != nil {
		return Result{}, err
	}
	var res Result
	mem0 := benchstat.UsedMemory(ctx, rdb)
	phase := cfg.Progress.Start("define feeds", int64(cfg.Feeds))
	feeds := make([]feed.Feed, cfg.Feeds)
	for i := range feeds {
		if feeds[i], err = define(ctx, fl, base+"/f/"+strconv.Itoa(i)); err != nil {
			return res, err
		}
		phase.Add(1)
	}
	phase.Done("")
	res.Definitions = (benchstat.UsedMemory(ctx, rdb) - mem0) / int64(cfg.Feeds)
	stopStages, err := stream.RunStages(ctx, rdb, cfg.Telemetry, cfg.Copies, fl.Stages()...)
	if err != nil {
		return res, err
	}
	defer stopStages()
	res.Items = cfg.Feeds * itemsPerFeed
	phase = cfg.Progress.Start("poll and deliver", int64(cfg.Feeds*itemsPerFeed/10))
	start, cpu := time.Now(), benchstat.ReadCPU(ctx, rdb)
	if err := pollAll(ctx, poller, feeds, cfg.Pollers); err != nil {
		return res, err
	}
	res.Polled = time.Since(start)
	want := int64(cfg.Feeds * itemsPerFeed / 10)
	topics := fl.Topics()
	if err := benchstat.Until(ctx, 20*time.Millisecond, func() (bool, error) {
		phase.Set(ch.n.Load())
		return ch.n.Load() >= want && stream.Drained(ctx, rdb, topics.Polls, feed.StageAssign) &&
			stream.Drained(ctx, rdb, topics.Collections, feed.StageDeliver), nil
	}); err != nil {
		return res, err
	}
	res.Elapsed = time.Since(start)
	res.CPU = benchstat.ReadCPU(ctx, rdb).PerItem(cpu, res.Items)
	phase.Done(fmt.Sprintf("%d digests", ch.n.Load()))
	if got := ch.n.Load(); got != want {
		return res, fmt.Errorf("feedbench: %d digests delivered, want %d", got, want)
	}
	all := benchstat.UsedMemory(ctx, rdb)
	res.Streams = (all - mem0) / int64(cfg.Feeds)
	// Everything is acknowledged: drop the stream entries (the Trimmer's
	// job once they are old enough) to see the state that stays.
	for _, tp := range []stream.Topic{topics.Polls, topics.Collections, topics.History} {
		for p := range tp.Partitions {
			_ = rdb.XTrimMaxLen(ctx, tp.Stream(p), 0).Err()
		}
	}
	res.State = (benchstat.UsedMemory(ctx, rdb) - mem0) / int64(cfg.Feeds)
	return res, nil
}

// define stores a feed at url, its "tens" subscribable (a digest every 10
// items) and a log subscription to it.
func define(ctx context.Context, fl *feed.Flow, url string) (feed.Feed, error) {
	f, _, err := fl.Store().PutFeed(ctx, feed.Feed{URL: url, IncludeExisting: true})
	if err != nil {
		return f, err
	}
	if _, _, err := fl.Store().PutSubscribable(ctx, feed.Subscribable{FeedID: f.ID, Name: "tens", Manager: feed.Manager{Kind: feed.EveryN, N: 10}}); err != nil {
		return f, err
	}
	_, _, err = fl.Subscribe(ctx, f.ID, "tens", feed.Destination{Kind: feed.DestLog, Name: "bench"})
	return f, err
}

// pollAll polls every feed once from n concurrent pollers.
func pollAll(ctx context.Context, poller *feed.Poller, feeds []feed.Feed, n int) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(n)
	for _, f := range feeds {
		g.Go(func() error {
			if _, err := poller.PollOnce(ctx, f); err != nil {
				return fmt.Errorf("feedbench: poll %s: %w", f.URL, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// feedServer starts the feed server: a process of its own through self, in
// this process when self is nil. stop ends it.
func feedServer(self func(args ...string) *exec.Cmd) (base string, stop func(), err error) {
	if self == nil {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(feedDoc(strings.TrimPrefix(r.URL.Path, "/f/"))))
		}))
		return srv.URL, srv.Close, nil
	}
	h, err := benchstat.StartHelper(self(ServerArgs...), "feedbench: feed server")
	if err != nil {
		return "", nil, err
	}
	return h.URL, h.Close, nil
}
