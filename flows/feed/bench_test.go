package feed

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/flows/feed/poll"
	"github.com/dropstream/dropstream/internal/egress/egresstest"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/subscriber"
	"github.com/dropstream/dropstream/stream"
)

// countChannel counts what it is asked to send.
type countChannel struct{ n atomic.Int64 }

func (c *countChannel) Name() string { return notifier.ChannelLog }
func (c *countChannel) Send(context.Context, notifier.Notification) error {
	c.n.Add(1)
	return nil
}

// benchFeed is an RSS document of 50 items unique to feed n.
func benchFeed(n string) []byte {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0"?><rss version="2.0"><channel><title>bench ` + n + `</title>`)
	for i := 0; i < 50; i++ {
		id := n + "-" + strconv.Itoa(i)
		fmt.Fprintf(&b, `<item><guid>urn:bench:%s</guid><title>Item %s</title><link>https://example.org/%s</link><description>Body of item %s, a few words long.</description><pubDate>Mon, 02 Mar 2026 09:00:00 +0000</pubDate></item>`, id, id, id, id)
	}
	b.WriteString(`</channel></rss>`)
	return []byte(b.String())
}

// infoSum returns the sum of the named fields of an INFO section.
func infoSum(ctx context.Context, rdb redis.UniversalClient, section string, fields ...string) float64 {
	info, _ := rdb.Info(ctx, section).Result()
	var sum float64
	for line := range strings.Lines(info) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if slices.Contains(fields, k) {
			f, _ := strconv.ParseFloat(v, 64)
			sum += f
		}
	}
	return sum
}

func usedMemory(ctx context.Context, rdb redis.UniversalClient) int64 {
	return int64(infoSum(ctx, rdb, "memory", "used_memory"))
}

// cpuTimes returns the CPU time used so far by this process and by Redis.
func cpuTimes(ctx context.Context, rdb redis.UniversalClient) (proc, server time.Duration) {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		time.Duration(infoSum(ctx, rdb, "cpu", "used_cpu_sys", "used_cpu_user") * float64(time.Second))
}

// BenchmarkFlow_feeds polls DROPSTREAM_BENCH_FEEDS feeds (default 10,000)
// of 50 items each from a local HTTP server through the whole flow (poll,
// observe, assign, complete every 10 items, deliver, clear) on redis-server,
// and reports items/s, CPU per item (this process, which also serves the
// feeds, and Redis), and Redis memory per feed: definitions, the state that
// stays, and what each stream holds per entry until it is trimmed. Run it
// alone:
//
//	scripts/testenv.sh sh -c 'go test -run ^$ -bench Flow_feeds -benchtime 1x ./flows/feed/'
func BenchmarkFlow_feeds(b *testing.B) {
	feeds := 10000
	if s := os.Getenv("DROPSTREAM_BENCH_FEEDS"); s != "" {
		feeds, _ = strconv.Atoi(s)
	}
	docs := make(map[string][]byte, feeds)
	for i := range feeds {
		docs["/f/"+strconv.Itoa(i)] = benchFeed(strconv.Itoa(i))
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(docs[r.URL.Path]) }))
	defer srv.Close()
	ctx := context.Background()
	for b.Loop() {
		rdb := testenv.Dial(b, testenv.RedisURL(b))
		ch := &countChannel{}
		ledger, _ := notifier.NewDeliveryLedger(rdb, notifier.DeliveryLedgerConfig{})
		disp, _ := notifier.NewDispatcher(ledger, map[string]notifier.Channel{notifier.ChannelLog: ch}, stream.Telemetry{})
		subs, _ := subscriber.NewStore(rdb, subscriber.StoreConfig{})
		pub := stream.NewPublisher(rdb, stream.Telemetry{})
		notify := func(ctx context.Context, reqs ...notifier.Request) error {
			return notifier.PublishRequests(ctx, pub, notifier.RequestTopic(8), reqs...)
		}
		// The feeds share one local host: its spacing across copies is
		// the least the pacer allows (1ms, 1,000 requests a second).
		fl, err := NewWith(rdb, pub, Deps{Subscribers: subs, Notify: notify, Sender: disp}, Config{Partitions: 8,
			Etiquette: EtiquetteConfig{HostSpacing: time.Millisecond}})
		if err != nil {
			b.Fatal(err)
		}
		// The feeds' server is on loopback, which the default egress
		// policy denies.
		poller, err := fl.NewPoller(PollerConfig{Fetch: poll.Config{RatePerHost: 1e6, Burst: 1000, Egress: egresstest.Allow(b, srv.URL)}})
		if err != nil {
			b.Fatal(err)
		}
		base := usedMemory(ctx, rdb)
		list := make([]Feed, feeds)
		for i := range feeds {
			list[i], _, err = fl.store.PutFeed(ctx, Feed{URL: srv.URL + "/f/" + strconv.Itoa(i), IncludeExisting: true})
			if err != nil {
				b.Fatal(err)
			}
			if _, _, err := fl.store.PutSubscribable(ctx, Subscribable{FeedID: list[i].ID, Name: "tens", Manager: Manager{Kind: EveryN, N: 10}}); err != nil {
				b.Fatal(err)
			}
			if _, _, err := fl.Subscribe(ctx, list[i].ID, "tens", Destination{Kind: DestLog, Name: "bench"}); err != nil {
				b.Fatal(err)
			}
		}
		defs := usedMemory(ctx, rdb) - base
		runCtx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for _, s := range fl.Stages() {
			for range 2 {
				r, err := stream.NewRunner(rdb, s, stream.Telemetry{})
				if err != nil {
					b.Fatal(err)
				}
				wg.Go(func() { _ = r.Run(runCtx) })
			}
		}
		start := time.Now()
		procCPU, redisCPU := cpuTimes(ctx, rdb)
		var next atomic.Int64
		var pollers sync.WaitGroup
		for range 32 {
			pollers.Go(func() {
				for i := next.Add(1) - 1; i < int64(feeds); i = next.Add(1) - 1 {
					if _, err := poller.PollOnce(ctx, list[i]); err != nil {
						b.Error(err)
					}
				}
			})
		}
		pollers.Wait()
		polled := time.Since(start)
		want := int64(feeds * 5)
		testenv.WaitFor(b, 10*time.Minute, func() bool { return ch.n.Load() >= want }, "deliveries")
		testenv.WaitFor(b, time.Minute, func() bool {
			return drained(ctx, rdb, fl.topics.Polls, StageAssign) && drained(ctx, rdb, fl.topics.Collections, StageDeliver)
		})
		elapsed := time.Since(start)
		procEnd, redisEnd := cpuTimes(ctx, rdb)
		cancel()
		wg.Wait()
		if got := ch.n.Load(); got != want {
			b.Fatalf("%d deliveries, want %d", got, want)
		}
		all := usedMemory(ctx, rdb) - base
		// Everything is acknowledged: drop the stream entries, one topic at
		// a time (the Trimmer's job in production, once they are older than
		// its minimum age), to see what each holds and the state that stays.
		streams := map[string]int64{}
		entries := map[string]int64{}
		before := usedMemory(ctx, rdb)
		for _, tp := range []stream.Topic{fl.topics.Polls, fl.topics.Collections, fl.topics.History} {
			for p := 0; p < tp.Partitions; p++ {
				entries[tp.Name] += rdb.XLen(ctx, tp.Stream(p)).Val()
				_ = rdb.XTrimMaxLen(ctx, tp.Stream(p), 0).Err()
			}
			after := usedMemory(ctx, rdb)
			streams[tp.Name], before = before-after, after
		}
		state := usedMemory(ctx, rdb) - base
		items := float64(feeds * 50)
		b.ReportMetric(items/elapsed.Seconds(), "items/s")
		b.ReportMetric(float64(feeds)/polled.Seconds(), "polls/s")
		// CPU per item, a figure the machine's load barely moves: the Go
		// side (the HTTP server, fetch, parse, stages) and Redis's.
		b.ReportMetric(float64((procEnd-procCPU).Microseconds())/items, "go-cpu-µs/item")
		b.ReportMetric(float64((redisEnd-redisCPU).Microseconds())/items, "redis-cpu-µs/item")
		b.ReportMetric(float64(all)/float64(feeds), "bytes/feed-with-streams")
		b.ReportMetric(float64(state)/float64(feeds), "bytes/feed-state")
		b.ReportMetric(float64(defs)/float64(feeds), "bytes/feed-definitions")
		for name, n := range streams {
			b.ReportMetric(float64(n)/float64(max(entries[name], 1)), "bytes/"+name+"-entry")
			b.ReportMetric(float64(entries[name])/float64(feeds), name+"-entries/feed")
		}
	}
}
