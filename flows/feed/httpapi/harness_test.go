package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/api/apitest"
	"github.com/dropstream/dropstream/flows/feed"
	"github.com/dropstream/dropstream/flows/feed/feedsim"
	"github.com/dropstream/dropstream/flows/feed/httpapi"
	"github.com/dropstream/dropstream/flows/feed/poll"
	"github.com/dropstream/dropstream/internal/egress/egresstest"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/email"
	"github.com/dropstream/dropstream/notifier/email/smtptest"
	notifierhttp "github.com/dropstream/dropstream/notifier/httpapi"
	"github.com/dropstream/dropstream/notifier/subscriber"
	"github.com/dropstream/dropstream/stream"
)

const waitTimeout = 20 * time.Second

// t0 is a Monday, 09:00 UTC.
var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

var (
	confirmLink     = regexp.MustCompile(`http://api\.test/v1/confirm/([0-9a-f]{64})`)
	unsubscribeLink = regexp.MustCompile(`^<(http://api\.test(/v1/unsubscribe/[0-9a-f]{64}))>$`)
)

// logSink is the notifier's log channel of the tests: it records the feed
// messages sent to log destinations.
type logSink struct {
	mu  sync.Mutex
	got []feed.Message
}

func (s *logSink) Name() string { return notifier.ChannelLog }

func (s *logSink) Send(_ context.Context, n notifier.Notification) error {
	var m feed.Message
	if err := json.Unmarshal(n.Body, &m); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, m)
	return nil
}

// harness serves the feed API over a flow whose stages, and the
// notifier's delivery stage with its email channel over an in-test SMTP
// server, run over a backend; its poller polls a simulated feed at the
// times the test sets.
type harness struct {
	t        *testing.T
	ctx      context.Context
	rdb      redis.UniversalClient
	flow     *feed.Flow
	subs     *subscriber.Store
	notify   func(ctx context.Context, reqs ...notifier.Request) error
	smtp     *smtptest.Server
	requests stream.Topic
	poller   *feed.Poller
	now      time.Time
	mu       sync.Mutex
	sink     *logSink
	feed     feed.Feed
}

// newHarness starts the stages and registers fd (its URL replaced by the
// simulated feed's); edits change the flow's configuration.
func newHarness(t *testing.T, b testenv.Backend, sim *feedsim.Feed, fd feed.Feed, edits ...func(*feed.Config)) *harness {
	t.Helper()
	rdb := b.Client(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() }) // before the backend closes
	h := &harness{t: t, ctx: ctx, rdb: rdb, now: t0, sink: &logSink{}, requests: notifier.RequestTopic(2)}
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	ledger, err := notifier.NewDeliveryLedger(rdb, notifier.DeliveryLedgerConfig{Lease: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	disp, err := notifier.NewDispatcher(ledger, map[string]notifier.Channel{notifier.ChannelLog: h.sink}, stream.Telemetry{})
	if err != nil {
		t.Fatal(err)
	}
	pub := stream.NewPublisher(rdb, stream.Telemetry{})
	if h.subs, err = subscriber.NewStore(rdb, subscriber.StoreConfig{}); err != nil {
		t.Fatal(err)
	}
	h.smtp = smtptest.Start(t, smtptest.Config{})
	mailer, err := email.New(email.Config{Addr: h.smtp.Addr, From: "feeds@dropstream.test", InsecureNoTLS: true, Timeout: 5 * time.Second,
		Egress: egresstest.Allow(t, h.smtp.Addr)})
	if err != nil {
		t.Fatal(err)
	}
	deliverer, err := notifier.NewDeliverer(rdb, h.requests, notifier.DeliverDeps{Subscribers: h.subs,
		Channels: map[string]notifier.Channel{email.ChannelName: mailer}, Publisher: pub},
		notifier.DeliverConfig{PublicURL: "http://api.test"}, stream.Telemetry{})
	if err != nil {
		t.Fatal(err)
	}
	h.notify = func(ctx context.Context, reqs ...notifier.Request) error {
		return notifier.PublishRequests(ctx, pub, h.requests, reqs...)
	}
	cfg := feed.Config{Partitions: 4, PublicURL: "http://api.test", Egress: egresstest.Allow(t, srv.URL),
		Etiquette: feed.EtiquetteConfig{HostSpacing: time.Millisecond}, Now: h.clock}
	for _, edit := range edits {
		edit(&cfg)
	}
	if h.flow, err = feed.NewWith(rdb, pub, feed.Deps{Subscribers: h.subs, Notify: h.notify, Sender: disp}, cfg); err != nil {
		t.Fatal(err)
	}
	fetch := poll.Config{RatePerHost: 1000, Burst: 100, Timeout: 500 * time.Millisecond, MaxBodyBytes: 64 << 10}
	if h.poller, err = h.flow.NewPoller(feed.PollerConfig{Now: h.clock, Fetch: fetch}); err != nil {
		t.Fatal(err)
	}
	for _, s := range append(h.flow.Stages(), deliverer.Stage()) {
		s.Config = stream.RunnerConfig{Block: 20 * time.Millisecond}
		r, err := stream.NewRunner(rdb, s, stream.Telemetry{})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { _ = r.Run(ctx) })
	}
	fd.URL = srv.URL + "/feed.xml"
	if h.feed, _, err = h.flow.Store().PutFeed(ctx, fd); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *harness) clock() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.now
}

// pollAt polls the feed at the given time and waits until the stages have
// handled everything it caused.
func (h *harness) pollAt(at time.Time) feed.Poll {
	h.t.Helper()
	h.mu.Lock()
	h.now = at
	h.mu.Unlock()
	p, err := h.poller.PollOnce(h.ctx, h.feed)
	if err != nil {
		h.t.Fatal(err)
	}
	h.settle()
	return p
}

// settle waits until the polls, collections and notifier requests groups
// have read and acknowledged every entry.
func (h *harness) settle() {
	h.t.Helper()
	topics := h.flow.Topics()
	testenv.WaitFor(h.t, waitTimeout, func() bool {
		return stream.Drained(h.ctx, h.rdb, topics.Polls, feed.StageAssign) && stream.Drained(h.ctx, h.rdb, topics.Collections, feed.StageDeliver) &&
			stream.Drained(h.ctx, h.rdb, h.requests, notifier.StageDeliver)
	}, "feed and notifier stages did not drain")
}

// subscribe adds a subscribable and a log subscription (confirmed at once)
// to it.
func (h *harness) subscribe(name string, m feed.Manager) {
	h.t.Helper()
	if _, _, err := h.flow.Store().PutSubscribable(h.ctx, feed.Subscribable{FeedID: h.feed.ID, Name: name, Manager: m}); err != nil {
		h.t.Fatal(err)
	}
	if sub, _, err := h.flow.Subscribe(h.ctx, h.feed.ID, name, feed.Destination{Kind: feed.DestLog, Name: "reader-" + name}); err != nil || !sub.Confirmed {
		h.t.Fatalf("log subscription %+v: %v", sub, err)
	}
}

// delivered returns, per subscribable, the guids of each collection sent
// to log destinations.
func (h *harness) delivered() map[string][][]string {
	h.sink.mu.Lock()
	defer h.sink.mu.Unlock()
	out := map[string][][]string{}
	for _, m := range h.sink.got {
		if m.Kind != "collection" {
			continue
		}
		var guids []string
		for _, it := range m.Items {
			guids = append(guids, it.GUID)
		}
		out[m.Subscribable] = append(out[m.Subscribable], guids)
	}
	return out
}

// states returns the state of every item by guid.
func (h *harness) states() map[string]string {
	h.t.Helper()
	items, err := h.flow.Items(h.ctx, h.feed.ID, 0, 1000)
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string]string{}
	for _, it := range items {
		out[it.GUID] = it.State
	}
	return out
}

// mailsTo returns the mails received by addr.
func (h *harness) mailsTo(addr string) []smtptest.Mail {
	var out []smtptest.Mail
	for _, m := range h.smtp.Received() {
		if m.To == addr {
			out = append(out, m)
		}
	}
	return out
}

// confirmToken returns the opt-in token in a confirmation mail's text and
// HTML parts.
func confirmToken(t *testing.T, m smtptest.Mail) string {
	t.Helper()
	text, htm := confirmLink.FindStringSubmatch(m.Parts["text/plain"]), confirmLink.FindStringSubmatch(m.Parts["text/html"])
	if text == nil || htm == nil || text[1] != htm[1] {
		t.Fatalf("confirmation mail %q without the notifier's opt-in link in both parts: %q", m.Subject(), m.Parts)
	}
	return text[1]
}

// newAPI serves the feed API of f.
func newAPI(t *testing.T, f *feed.Flow) *api.Server {
	t.Helper()
	srv, _ := apitest.NewServer(t, api.Config{})
	httpapi.Register(srv, f)
	return srv
}

// newNotifierAPI serves the feed API and the notifier's subscriber routes
// (the opt-in and unsubscribe links).
func newNotifierAPI(t *testing.T, h *harness) *api.Server {
	t.Helper()
	srv := newAPI(t, h.flow)
	notifierhttp.SubscriberRoutes{Store: h.subs, PublicURL: "http://api.test", Notify: h.notify}.Register(srv)
	return srv
}

// call sends a request to srv, decodes the JSON answer into out (when not
// nil) and returns the status.
func call(t *testing.T, srv *api.Server, method, path string, body, out any) int {
	t.Helper()
	r := apitest.Request(t, srv, method, path, body)
	if out != nil && len(r.Body) > 0 {
		r.JSON(t, out)
	}
	return r.Status
}

func item(guid, title string) feedsim.Item {
	return feedsim.Item{GUID: guid, Title: title, Link: "https://example.org/" + guid, Description: "about " + title}
}
