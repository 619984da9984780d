package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"

	"github.com/dropstream/dropstream/flows/comic"
	"github.com/dropstream/dropstream/flows/feed"
	"github.com/dropstream/dropstream/flows/feed/feedsim"
	"github.com/dropstream/dropstream/internal/egress/egresstest"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/subscriber"
	"github.com/dropstream/dropstream/stream"
)

// The drivers of TestCluster_twoProcessesShareEveryStage whose
// notifications go through the notifier's request path (notifier-deliver).

// messages returns the notifier messages the sink accepted so far.
func (h *hookSink) messages() []notifier.Message {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]notifier.Message(nil), h.got...)
}

// comicCopies subscribes three people with their own /notify URLs and
// lists comics over the API; the receiver refuses its first requests, so
// the notifier's retries (a service in both processes) are exercised.
// Each comic must reach each matching subscriber once.
type comicCopies struct {
	rcv   *hookSink
	srv   *httptest.Server
	calls int
	want  map[[2]string]int // (comic id, email) → deliveries
}

// comicSubscribers are the subscriptions: email → partial comic.
var comicSubscribers = map[string]map[string]any{
	"dc@example.com":       {"publisher": "DC"},
	"watchmen@example.com": {"series": "Watchmen"},
	"marvel@example.com":   {"publisher": "Marvel"},
}

func (c *comicCopies) name() string { return "comic" }

func (c *comicCopies) setup(t *testing.T, e *copiesEnv) {
	c.rcv, c.want = &hookSink{fail: 3}, map[[2]string]int{}
	c.srv = httptest.NewServer(c.rcv)
	t.Cleanup(c.srv.Close)
	for email, body := range comicSubscribers {
		c.calls++
		e.call(t, c.calls, http.MethodPost, "/v1/subscriptions", map[string]any{"email": email, "body": body,
			"notify_url": c.srv.URL + "/notify/" + email}, nil, http.StatusCreated)
	}
}

func (c *comicCopies) wave(t *testing.T, e *copiesEnv, n int) {
	for k, pub := range [][2]string{{"DC", "Watchmen"}, {"DC", "Batman"}, {"Marvel", "X-Men"}, {"Image", "Saga"}} {
		cm := comic.Comic{Grade: 9.4, Issue: fmt.Sprint(n*4 + k + 1), KeyIssue: k == 0, PriceCents: 500 + int64(n), Printing: 1,
			Publisher: pub[0], Series: pub[1], Title: fmt.Sprintf("%s #%d", pub[1], n*4+k+1), Year: 1990 + int64(n)}
		var got struct {
			ID      string `json:"id"`
			Created bool   `json:"created"`
		}
		c.calls++
		e.call(t, c.calls, http.MethodPost, "/v1/comics", cm, &got, http.StatusCreated)
		for email, body := range comicSubscribers {
			if body["publisher"] == cm.Publisher || body["series"] == cm.Series {
				c.want[[2]string{got.ID, email}]++
			}
		}
	}
}

// received returns (comic id, email) → deliveries.
func (c *comicCopies) received(t *testing.T) map[[2]string]int {
	out := map[[2]string]int{}
	for _, m := range c.rcv.messages() {
		var b comic.NotifyBody
		if err := json.Unmarshal(m.Payload, &b); err != nil {
			t.Errorf("comic notification %s: payload %s: %v", m.ID, m.Payload, err)
		}
		out[[2]string{b.ComicID, b.Email}]++
	}
	return out
}

func (c *comicCopies) lacking(*testing.T) string { return "" }

func (c *comicCopies) settled(*copiesEnv) string {
	if got := len(c.rcv.messages()); got < len(c.want) {
		return fmt.Sprintf("%d of %d comic notifications received", got, len(c.want))
	}
	return ""
}

func (c *comicCopies) check(t *testing.T, e *copiesEnv) {
	if got := c.received(t); !mapsEqual(got, c.want) {
		t.Errorf("comic notifications %v, want each comic once per matching subscriber: %v", got, c.want)
	}
	if n := c.rcv.refusedCount(); n != 3 {
		t.Errorf("%d notifications refused, want 3 (then retried)", n)
	}
}

// feedCopies serves four feeds (one per partition), each with a
// subscribable of each item and a webhook subscription confirmed through
// the notifier's opt-in link, adds an item to every feed per wave and polls
// them from the test (the feed-poller service polls every feed in every
// copy). Each item must reach its feed's webhook once.
type feedCopies struct {
	sink   *hookSink
	sims   []*feedsim.Feed
	feeds  []feed.Feed
	poller *feed.Poller
	want   map[string]string // guid → feed URL
}

// confirmLink finds the token of an opt-in link in a message's text.
var confirmLink = regexp.MustCompile(regexp.QuoteMeta(notifier.ConfirmPath) + `([A-Za-z0-9_-]+)`)

func (f *feedCopies) name() string { return "feed" }

func (f *feedCopies) setup(t *testing.T, e *copiesEnv) {
	f.sink, f.want = &hookSink{}, map[string]string{}
	hooks := httptest.NewServer(f.sink)
	t.Cleanup(hooks.Close)
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	polls := feed.NewTopics(copiesPartitions).Polls
	paths := map[int]string{}
	for i := 0; len(paths) < copiesPartitions; i++ {
		if i > 1000 {
			t.Fatalf("no feed path found for every partition: %v", paths)
		}
		path := fmt.Sprintf("/feed%d.xml", i)
		if p := polls.Partition(feed.FeedID(srv.URL + path)); paths[p] == "" {
			paths[p] = path
		}
	}
	for p := range copiesPartitions {
		sim := feedsim.New(feedsim.RSS, feedItem(fmt.Sprintf("p%d-0", p)))
		mux.Handle(paths[p], sim)
		var fd feed.Feed
		e.call(t, p, http.MethodPost, "/v1/feeds", map[string]any{"url": srv.URL + paths[p], "include_existing": true}, &fd, http.StatusCreated)
		e.call(t, p+1, http.MethodPost, "/v1/feeds/"+fd.ID+"/subscribables", map[string]any{"name": "each", "manager": map[string]any{"kind": feed.EachItem}},
			nil, http.StatusCreated)
		e.call(t, p, http.MethodPost, "/v1/feeds/"+fd.ID+"/subscribables/each/subscriptions",
			map[string]any{"destination": map[string]any{"kind": feed.DestWebhook, "url": fmt.Sprintf("%s/hook/%d", hooks.URL, p)}}, nil, http.StatusCreated)
		f.sims, f.feeds = append(f.sims, sim), append(f.feeds, fd)
	}
	// The opt-in requests go through notifier-deliver; following each link
	// confirms its destination.
	var tokens []string
	testenv.WaitFor(t, copiesSettle, func() bool {
		tokens = tokens[:0]
		for _, m := range f.sink.messages() {
			if sub := confirmLink.FindStringSubmatch(m.Text); m.Event == "feed.confirm" && sub != nil {
				tokens = append(tokens, sub[1])
			}
		}
		return len(tokens) >= len(f.feeds)
	}, "an opt-in request for each feed's webhook")
	if len(tokens) != len(f.feeds) {
		t.Fatalf("%d opt-in requests, want %d", len(tokens), len(f.feeds))
	}
	for i, tok := range tokens {
		e.call(t, i, http.MethodPost, notifier.ConfirmPath+tok, nil, nil, http.StatusOK)
	}

	tel := quietTel()
	subs, err := subscriber.NewStore(e.rdb, subscriber.StoreConfig{Logger: tel.Logger})
	if err != nil {
		t.Fatal(err)
	}
	pollOnly := func(context.Context, ...notifier.Request) error { return errors.New("the test's feed flow only polls") }
	fl, err := feed.NewWith(e.rdb, stream.NewPublisher(e.rdb, tel), feed.Deps{Subscribers: subs, Notify: pollOnly, Sender: pollOnlySender{}},
		feed.Config{Partitions: copiesPartitions, Logger: tel.Logger, Egress: egresstest.Loopback(t)})
	if err != nil {
		t.Fatal(err)
	}
	if f.poller, err = fl.NewPoller(feed.PollerConfig{}); err != nil {
		t.Fatal(err)
	}
}

// pollOnlySender is the Sender of the test's feed flow, which only polls.
type pollOnlySender struct{}

func (pollOnlySender) Deliver(context.Context, notifier.Delivery) (string, error) {
	return "", errors.New("the test's feed flow only polls")
}

func (f *feedCopies) wave(t *testing.T, e *copiesEnv, n int) {
	for p, sim := range f.sims {
		guid := fmt.Sprintf("p%d-%d", p, n)
		if n > 0 {
			sim.Add(feedItem(guid))
		}
		f.want[guid] = f.feeds[p].URL
		if _, err := f.poller.PollOnce(context.Background(), f.feeds[p]); err != nil {
			t.Fatalf("wave %d: poll %s: %v", n, f.feeds[p].URL, err)
		}
	}
}

// delivered returns guid → feed URLs of the items received in collections.
func (f *feedCopies) delivered() map[string][]string {
	out := map[string][]string{}
	for _, m := range f.sink.messages() {
		var fm feed.Message
		if m.Event == "feed.confirm" || json.Unmarshal(m.Payload, &fm) != nil {
			continue
		}
		for _, it := range fm.Items {
			out[it.GUID] = append(out[it.GUID], fm.FeedURL)
		}
	}
	return out
}

func (f *feedCopies) lacking(*testing.T) string { return "" }

func (f *feedCopies) settled(*copiesEnv) string {
	if got := f.delivered(); len(got) < len(f.want) {
		return fmt.Sprintf("%d of %d feed items delivered", len(got), len(f.want))
	}
	return ""
}

func (f *feedCopies) check(t *testing.T, e *copiesEnv) {
	got := f.delivered()
	for guid, url := range f.want {
		if urls := got[guid]; len(urls) != 1 || urls[0] != url {
			t.Errorf("item %s of %s delivered in %v, want once in its feed's collection", guid, url, urls)
		}
	}
	for guid := range got {
		if f.want[guid] == "" {
			t.Errorf("unexpected item %s delivered", guid)
		}
	}
}
