package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dropstream/dropstream/flows/feed"
	"github.com/dropstream/dropstream/flows/feed/feedsim"
	"github.com/dropstream/dropstream/internal/egress/egresstest"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/subscriber"
	"github.com/dropstream/dropstream/stream"
)

// feedFlow polls two feeds (of different partitions) on the cluster: each
// item of a pair manager's subscribable is delivered once in a collection
// of two, an excluded item is skipped, a deleted subscribable releases
// its open collection, and a 308 moves a feed's stored URL.
func feedFlow(t *testing.T, nodes string) {
	ctx := context.Background()
	rdb := dial(t, nodes)
	// Feeds "a" and "b", served at paths of different partitions.
	sims := map[string]*feedsim.Feed{
		"a": feedsim.New(feedsim.RSS, feedItem("a1"), feedItem("a2"), feedItem("a3"), feedItem("a4")),
		"b": feedsim.New(feedsim.Atom, feedItem("b1"), feedItem("b2"), feedItem("b3"), feedItem("b4")),
	}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	polls := feed.NewTopics(8).Polls
	paths := map[string]string{"a": "/a.xml"}
	for i := 0; paths["b"] == ""; i++ {
		if p := fmt.Sprintf("/b%d.xml", i); polls.Partition(feed.FeedID(srv.URL+p)) != polls.Partition(feed.FeedID(srv.URL+"/a.xml")) {
			paths["b"] = p
		}
	}
	for name, sim := range sims {
		if name != "a" {
			mux.Handle(paths[name], sim)
		}
	}
	// Once moved, feed "a" answers a permanent redirect to its new URL.
	const movedPath = "/a-moved.xml"
	var moved atomic.Bool
	var redirects atomic.Int64
	mux.Handle(movedPath, sims["a"])
	mux.Handle(paths["a"], http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if moved.Load() {
			redirects.Add(1)
			http.Redirect(w, r, movedPath, http.StatusPermanentRedirect)
			return
		}
		sims["a"].ServeHTTP(w, r)
	}))

	tel := quietTel()
	ledger, err := notifier.NewDeliveryLedger(rdb, notifier.DeliveryLedgerConfig{Lease: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	log := &collectionLog{}
	disp, err := notifier.NewDispatcher(ledger, map[string]notifier.Channel{notifier.ChannelLog: log}, tel)
	if err != nil {
		t.Fatal(err)
	}
	subs, err := subscriber.NewStore(rdb, subscriber.StoreConfig{Logger: tel.Logger})
	if err != nil {
		t.Fatal(err)
	}
	pub := stream.NewPublisher(rdb, tel)
	requests := notifier.RequestTopic(8)
	notify := func(ctx context.Context, reqs ...notifier.Request) error {
		return notifier.PublishRequests(ctx, pub, requests, reqs...)
	}
	fl, err := feed.NewWith(rdb, pub, feed.Deps{Subscribers: subs, Notify: notify, Sender: disp}, feed.Config{Partitions: 8, Logger: tel.Logger, Egress: egresstest.Allow(t, srv.URL)})
	if err != nil {
		t.Fatal(err)
	}
	runStages(t, rdb, fl.Stages()...)
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	var nowMu sync.Mutex
	clock := func() time.Time { nowMu.Lock(); defer nowMu.Unlock(); return now }
	poller, err := fl.NewPoller(feed.PollerConfig{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	feeds := map[string]feed.Feed{}
	parts := map[int]bool{}
	for name, path := range paths {
		fd, _, err := fl.Store().PutFeed(ctx, feed.Feed{URL: srv.URL + path, IncludeExisting: true, AwaitStabilizationMinutes: 10, MaxDelayMinutes: 60})
		if err != nil {
			t.Fatal(err)
		}
		feeds[name] = fd
		parts[fl.Topics().Polls.Partition(fd.ID)] = true
		for _, sb := range []feed.Subscribable{{FeedID: fd.ID, Name: "pairs", Manager: feed.Manager{Kind: feed.EveryN, N: 2}},
			{FeedID: fd.ID, Name: "spare", Manager: feed.Manager{Kind: feed.EveryN, N: 10}}} {
			if _, _, err := fl.Store().PutSubscribable(ctx, sb); err != nil {
				t.Fatal(err)
			}
		}
		if sub, _, err := fl.Subscribe(ctx, fd.ID, "pairs", feed.Destination{Kind: feed.DestLog, Name: "reader-" + name}); err != nil || !sub.Confirmed {
			t.Fatalf("subscribe to %s: %+v, %v", name, sub, err)
		}
	}
	if len(parts) != 2 {
		t.Fatalf("the feeds share a partition; want two partitions")
	}
	groups := []group{{fl.Topics().Polls, feed.StageAssign}, {fl.Topics().Collections, feed.StageDeliver}}
	pollAll := func(at time.Time) {
		t.Helper()
		nowMu.Lock()
		now = at
		nowMu.Unlock()
		for name, fd := range feeds {
			if _, err := poller.PollOnce(ctx, fd); err != nil {
				t.Fatalf("poll %s: %v", name, err)
			}
		}
		testenv.WaitFor(t, clusterWait, func() bool { return busy(ctx, rdb, groups) == "" }, "feed stages drained")
	}

	// Items are assigned once unchanged for 10 minutes.
	t0 := now
	pollAll(t0)
	pollAll(t0.Add(10 * time.Minute))
	// The spare subscribable holds an open collection of four items: its
	// deletion releases them.
	for _, fd := range feeds {
		if err := fl.Store().DeleteSubscribable(ctx, fd.ID, "spare"); err != nil {
			t.Fatalf("delete subscribable: %v", err)
		}
	}
	// Item 5, not stable yet, is excluded: it is never sent.
	for name, sim := range sims {
		sim.Add(feedItem(name + "5"))
	}
	pollAll(t0.Add(11 * time.Minute))
	for name, fd := range feeds {
		if st, err := fl.Exclude(ctx, fd.ID, feed.IID(name+"5")); err != nil || st != feed.StateUnassigned {
			t.Fatalf("exclude %s5: was %q, %v; want unassigned", name, st, err)
		}
	}
	for name, sim := range sims {
		sim.Add(feedItem(name+"6"), feedItem(name+"7"))
	}
	pollAll(t0.Add(12 * time.Minute))
	pollAll(t0.Add(25 * time.Minute))

	want := map[string][][]string{
		srv.URL + paths["a"]: {{"a1", "a2"}, {"a3", "a4"}, {"a6", "a7"}},
		srv.URL + paths["b"]: {{"b1", "b2"}, {"b3", "b4"}, {"b6", "b7"}},
	}
	if got := log.collections(); !reflect.DeepEqual(got, want) {
		t.Errorf("collections sent %v, want %v", got, want)
	}

	// A 308 moves feed "a": its stored URL becomes the new one, its id
	// stays, and polling the stored feed no longer meets the redirect.
	moved.Store(true)
	pollAll(t0.Add(26 * time.Minute))
	got, err := fl.Store().Feed(ctx, feeds["a"].ID)
	if err != nil || got.URL != srv.URL+movedPath {
		t.Fatalf("feed a after a 308: %+v, %v; want its URL moved to %s", got, err, srv.URL+movedPath)
	}
	if other, err := fl.Store().Feed(ctx, feeds["b"].ID); err != nil || other.URL != srv.URL+paths["b"] {
		t.Errorf("feed b after a's move: %+v, %v; want its URL kept", other, err)
	}
	seen := redirects.Load()
	if seen == 0 {
		t.Fatal("the old URL of feed a answered no redirect")
	}
	feeds["a"] = got
	pollAll(t0.Add(27 * time.Minute))
	if n := redirects.Load(); n != seen {
		t.Errorf("polling the moved feed met %d more redirects, want none", n-seen)
	}
}

func feedItem(guid string) feedsim.Item {
	return feedsim.Item{GUID: guid, Title: "Item " + guid, Link: "https://example.org/" + guid, Description: "about " + guid}
}

// collectionLog is a log channel recording the feed collections sent.
type collectionLog struct {
	mu  sync.Mutex
	got []feed.Message
}

func (c *collectionLog) Name() string { return notifier.ChannelLog }

func (c *collectionLog) Send(_ context.Context, n notifier.Notification) error {
	var m feed.Message
	if err := json.Unmarshal(n.Body, &m); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, m)
	return nil
}

// collections returns, per feed URL, the guids of each collection sent,
// in order.
func (c *collectionLog) collections() map[string][][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string][][]string{}
	for _, m := range c.got {
		if m.Kind != "collection" {
			continue
		}
		var guids []string
		for _, it := range m.Items {
			guids = append(guids, it.GUID)
		}
		out[m.FeedURL] = append(out[m.FeedURL], guids)
	}
	return out
}
