package feed

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/dropstream/dropstream/flows/feed/feedsim"
	"github.com/dropstream/dropstream/flows/feed/poll"
	"github.com/dropstream/dropstream/internal/egress/egresstest"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/email"
	"github.com/dropstream/dropstream/notifier/subscriber"
	"github.com/dropstream/dropstream/stream"
)

const waitTimeout = 20 * time.Second

// t0 is a Monday, 09:00 UTC.
var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// recorder is a notifier channel recording what it is asked to send; fail,
// when set, makes sends to a recipient fail (retryably) n times.
type recorder struct {
	name string
	mu   sync.Mutex
	got  []Message
	fail map[string]int
}

func (s *recorder) Name() string { return s.name }

func (s *recorder) Send(_ context.Context, n notifier.Notification) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail[n.Recipient.ID] > 0 {
		s.fail[n.Recipient.ID]--
		return &notifier.DeliveryError{Channel: s.name, Retryable: true, Detail: "injected"}
	}
	var m Message
	if err := json.Unmarshal(n.Body, &m); err != nil {
		return err
	}
	s.got = append(s.got, m)
	return nil
}

// messages returns what was sent of a kind ("collection", "confirm").
func (s *recorder) messages(kind string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.got {
		if m.Kind == kind {
			out = append(out, m)
		}
	}
	return out
}

// harness runs the flow's stages over a backend, a poller with a settable
// clock and a simulated feed served over HTTP, and the notifier's generic
// delivery stage with its real email channel over an in-test SMTP server.
type harness struct {
	t    *testing.T
	ctx  context.Context
	rdb  redis.UniversalClient
	flow *Flow
	subs *subscriber.Store
	smtp *smtpServer
	// requests is the notifier's request topic.
	requests stream.Topic
	poller   *Poller
	clock    *testenv.Clock
	sink     *recorder
	sim      *feedsim.Feed
	srv      *httptest.Server
	feed     Feed
	reader   *sdkmetric.ManualReader
	// mode makes the server misbehave: "malformed", "huge", "slow", "loop".
	mode atomic.Value
	// skip names stages newHarness does not start (a test runs its own
	// copies of them with runStage).
	skip map[string]bool
	stop context.CancelFunc
	wg   sync.WaitGroup
}

// without returns an option of newHarness that leaves a stage to the test.
func without(stage string) func(*harness) {
	return func(h *harness) { h.skip[stage] = true }
}

// stage returns the flow's stage of that name.
func (h *harness) stage(name string) stream.Stage {
	h.t.Helper()
	for _, s := range h.flow.Stages() {
		if s.Name == name {
			return s
		}
	}
	h.t.Fatalf("no stage %s", name)
	return stream.Stage{}
}

// runStage runs one copy of s under the consumer name until the returned
// function is called or the test ends. The function returns at once: a
// copy stuck in a handler is abandoned, as a dead process is.
func (h *harness) runStage(s stream.Stage, consumer string, claimIdle time.Duration) (kill func()) {
	h.t.Helper()
	s.Config = stream.RunnerConfig{Consumer: consumer, Block: 20 * time.Millisecond, ClaimInterval: min(200*time.Millisecond, claimIdle/4),
		ClaimIdle: claimIdle, HandlerTimeout: min(2*time.Second, claimIdle/4), Retry: stream.RetryConfig{InitialInterval: 5 * time.Millisecond, MaxInterval: 20 * time.Millisecond}}
	r, err := stream.NewRunner(h.rdb, s, stream.Telemetry{})
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(h.ctx)
	failed := make(chan error, 1)
	h.wg.Go(func() { failed <- r.Run(ctx) })
	select {
	case <-r.Started():
	case err := <-failed:
		h.t.Fatalf("stage %s did not start: %v", s.Name, err)
	case <-time.After(waitTimeout):
		h.t.Fatalf("stage %s not started within %s", s.Name, waitTimeout)
	}
	return cancel
}

// secretBody is what the "secret500" mode answers with its 500: it must
// never be read back through a poll's error.
const secretBody = "DB_PASSWORD=hunter2-0123456789 stack trace at internal.corp:5432"

// newHarness starts the stages and registers fd (its URL replaced by the
// simulated feed's).
func newHarness(t *testing.T, b testenv.Backend, sim *feedsim.Feed, fd Feed, opts ...func(*harness)) *harness {
	t.Helper()
	return newHarnessWith(t, b, sim, fd, nil, opts...)
}

// newHarnessWith is newHarness with edit changing the flow's config before
// the flow is built.
func newHarnessWith(t *testing.T, b testenv.Backend, sim *feedsim.Feed, fd Feed, edit func(*Config), opts ...func(*harness)) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	rdb := b.Client(t)
	h := &harness{t: t, ctx: ctx, rdb: rdb, clock: testenv.NewClock(t0), sink: &recorder{name: notifier.ChannelLog, fail: map[string]int{}}, sim: sim,
		skip: map[string]bool{}, stop: cancel}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mode, _ := h.mode.Load().(string)
		switch mode {
		case "malformed":
			_, _ = w.Write([]byte(`<?xml version="1.0"?><rss version="2.0"><channel><item><title>broken`))
		case "huge":
			w.Header().Set("Content-Type", "application/rss+xml")
			_, _ = w.Write([]byte(`<?xml version="1.0"?><rss version="2.0"><channel><title>`))
			_, _ = w.Write(bytes.Repeat([]byte("x"), 200<<10))
			_, _ = w.Write([]byte(`</title></channel></rss>`))
		case "slow":
			select { // a server slower than the fetch timeout
			case <-r.Context().Done():
			case <-time.After(3 * time.Second):
			}
		case "loop":
			http.Redirect(w, r, r.URL.Path, http.StatusFound)
		case "secret500":
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(secretBody))
		case "gone":
			w.WriteHeader(http.StatusGone)
			_, _ = w.Write([]byte(secretBody))
		case "moved301", "moved308", "found302":
			if r.URL.Path != "/moved.xml" {
				http.Redirect(w, r, "/moved.xml", map[string]int{"moved301": 301, "moved308": 308, "found302": 302}[mode])
				return
			}
			sim.ServeHTTP(w, r)
		default:
			sim.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(h.srv.Close)
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
	h.smtp = startSMTP(t)
	mailer, err := email.New(email.Config{Addr: h.smtp.addr, From: "feeds@dropstream.test", InsecureNoTLS: true, Timeout: 5 * time.Second,
		Egress: egresstest.Allow(t, h.smtp.addr)})
	if err != nil {
		t.Fatal(err)
	}
	h.requests = notifier.RequestTopic(2)
	deliverer, err := notifier.NewDeliverer(rdb, h.requests, notifier.DeliverDeps{Subscribers: h.subs,
		Channels: map[string]notifier.Channel{email.ChannelName: mailer}, Publisher: pub},
		notifier.DeliverConfig{PublicURL: "http://api.test"}, stream.Telemetry{})
	if err != nil {
		t.Fatal(err)
	}
	notify := func(ctx context.Context, reqs ...notifier.Request) error {
		return notifier.PublishRequests(ctx, pub, h.requests, reqs...)
	}
	h.reader = sdkmetric.NewManualReader()
	// The poller may fetch the test's feed server, on loopback.
	cfg := Config{Partitions: 4, PublicURL: "http://api.test",
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.reader)), Egress: egresstest.Allow(t, h.srv.URL),
		Etiquette: EtiquetteConfig{HostSpacing: time.Millisecond}, Now: h.clock.Now}
	if edit != nil {
		edit(&cfg)
	}
	h.flow, err = NewWith(rdb, pub, Deps{Subscribers: h.subs, Notify: notify, Sender: disp}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.poller, err = h.flow.NewPoller(PollerConfig{Now: h.clock.Now, Fetch: pollFetchConfig()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); h.wg.Wait() })
	for _, o := range opts {
		o(h)
	}
	for _, s := range append(h.flow.Stages(), deliverer.Stage()) {
		if !h.skip[s.Name] {
			h.runStage(s, "", 10*time.Second)
		}
	}
	fd.URL = h.srv.URL + "/feed.xml"
	h.feed, _, err = h.flow.store.PutFeed(ctx, fd)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// pollAt polls the feed at the given time and waits until the stages
// have handled everything it caused.
func (h *harness) pollAt(at time.Time) Poll {
	h.t.Helper()
	h.clock.Set(at)
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
	testenv.WaitFor(h.t, waitTimeout, func() bool {
		return stream.Drained(h.ctx, h.rdb, h.flow.topics.Polls, StageAssign) && stream.Drained(h.ctx, h.rdb, h.flow.topics.Collections, StageDeliver) &&
			stream.Drained(h.ctx, h.rdb, h.requests, notifier.StageDeliver)
	}, "feed and notifier stages did not drain")
}

// subscribe adds a subscribable and a log subscription (confirmed at once)
// to it.
func (h *harness) subscribe(name string, m Manager) Subscription {
	h.t.Helper()
	if _, _, err := h.flow.store.PutSubscribable(h.ctx, Subscribable{FeedID: h.feed.ID, Name: name, Manager: m}); err != nil {
		h.t.Fatal(err)
	}
	sub, _, err := h.flow.Subscribe(h.ctx, h.feed.ID, name, Destination{Kind: DestLog, Name: "reader-" + name})
	if err != nil || !sub.Confirmed {
		h.t.Fatalf("log subscription %+v: %v", sub, err)
	}
	return sub
}

// delivered returns, per subscribable, the guids of each collection sent.
func (h *harness) delivered() map[string][][]string {
	out := map[string][][]string{}
	for _, m := range h.sink.messages("collection") {
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

// wantAllCleared fails the test for each item not cleared.
func (h *harness) wantAllCleared() {
	h.t.Helper()
	for guid, st := range h.states() {
		if st != StateCleared {
			h.t.Errorf("item %s is %s, want cleared", guid, st)
		}
	}
}

func item(guid, title string) feedsim.Item {
	return feedsim.Item{GUID: guid, Title: title, Link: "https://example.org/" + guid, Description: "about " + title}
}

func pollFetchConfig() poll.Config {
	return poll.Config{RatePerHost: 1000, Burst: 100, Timeout: 500 * time.Millisecond, MaxBodyBytes: 64 << 10}
}
