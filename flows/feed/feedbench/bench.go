// Package feedbench measures the feed flow end to end on Redis: feeds of
// 50 items served by a feed server in a process of its own, each polled
// once through the whole flow (poll, observe, assign, a digest every 10
// items, delivery, clear). `dropstream bench feed` runs it.
package feedbench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/flows/feed"
	"github.com/dropstream/dropstream/flows/feed/feedsim"
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
	// runs apart (ServerArgs). Required.
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
	server, err := benchstat.StartHelper(cfg.Self(ServerArgs...), "feedbench: feed server")
	if err != nil {
		return Result{}, err
	}
	defer server.Close()
	base := server.URL
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

// ServerArgs are the arguments of the binary that run Serve: the feed
// server of the bench, in a process of its own so its CPU stays out of the
// flow's figure.
var ServerArgs = []string{"bench", "feed-server"}

// itemsPerFeed is the items of every feed's document.
const itemsPerFeed = 50

// Serve serves every feed's document (feedDoc) on a free loopback port,
// prints the server's base URL as one line to stdout, and serves until
// stdin ends or ctx is done. args are its flags (none today).
func Serve(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("bench feed-server", flag.ContinueOnError)
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	base, err := feedsim.Serve(ctx, "127.0.0.1:0", http.HandlerFunc(serveFeed))
	if err != nil {
		return fmt.Errorf("feedbench: serve: %w", err)
	}
	if _, err := fmt.Fprintln(stdout, base); err != nil {
		return err
	}
	go func() { _, _ = io.Copy(io.Discard, stdin); cancel() }()
	<-ctx.Done()
	return nil
}

// serveFeed answers /f/<n> with feed n's document.
func serveFeed(w http.ResponseWriter, r *http.Request) {
	n, ok := strings.CutPrefix(r.URL.Path, "/f/")
	if _, err := strconv.Atoi(n); !ok || err != nil {
		http.NotFound(w, r)
		return
	}
	_, _ = io.WriteString(w, feedDoc(n))
}

// feedDoc is an RSS document of itemsPerFeed items unique to feed n.
func feedDoc(n string) string {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0"?><rss version="2.0"><channel><title>bench ` + n + `</title>`)
	for i := range itemsPerFeed {
		id := n + "-" + strconv.Itoa(i)
		fmt.Fprintf(&b, `<item><guid>urn:bench:%s</guid><title>Item %s</title><link>https://example.org/%s</link><description>Body of item %s, a few words long.</description><pubDate>Mon, 02 Mar 2026 09:00:00 +0000</pubDate></item>`, id, id, id, id)
	}
	b.WriteString(`</channel></rss>`)
	return b.String()
}

// Bench is `dropstream bench feed`: Run over the app's Redis.
var Bench = flow.Bench{
	Name: "feed",
	Summary: "the feed flow end to end: 10k feeds of 50 items from a feed server in another process, each\n" +
		"polled once through poll, assign, digests and delivery: items/s, CPU per item, Redis bytes per feed",
	Help: "Measures the feed flow against the configured Redis (an empty database): every feed polled once\n" +
		"through the whole flow, its feeds served by a process of its own so its CPU is not in the figure.",
	Bind: bind,
}

// bind binds the target's flags and returns its run.
func bind(fs *flag.FlagSet) flow.BenchRun {
	var bc Config
	settings.BindFlags(fs, &bc)
	return flow.BenchRun{Run: func(ctx context.Context, env flow.BenchEnv) error {
		bc.Partitions, bc.Self, bc.Telemetry, bc.Progress = env.Settings.Partitions, env.Self, env.Telemetry, env.Phases
		settings.Defaults(&bc)
		out := env.Stdout
		fmt.Fprintf(out, "bench feed: %s, %d feeds of %d items from a feed server in another process, %d pollers, %d copies per stage, %d partitions, GOMAXPROCS %d\n",
			env.RedisName, bc.Feeds, itemsPerFeed, bc.Pollers, bc.Copies, bc.Partitions, runtime.GOMAXPROCS(0))
		r, err := Run(ctx, env.Redis, bc)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "items: %d through the flow in %s = %.0f items/s; polls published %.0f/s\n", r.Items,
			r.Elapsed.Round(time.Millisecond), float64(r.Items)/r.Elapsed.Seconds(), float64(bc.Feeds)/r.Polled.Seconds())
		fmt.Fprintf(out, "cpu per item: %s (polls, parse and stages)\n", r.CPU)
		fmt.Fprintf(out, "Redis bytes per feed: %d definitions, %d with the run's stream entries, %d once they are trimmed\n",
			r.Definitions, r.Streams, r.State)
		return nil
	}}
}
