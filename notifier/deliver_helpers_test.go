package notifier

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/dropstream/dropstream/internal/egress/egresstest"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/notifier/history"
	"github.com/dropstream/dropstream/notifier/subscriber"
	"github.com/dropstream/dropstream/notifier/throttle"
	"github.com/dropstream/dropstream/stream"
)

// receiver is a webhook receiver: it answers with the next status of its
// script (200 once used up), verifies signatures with the secrets it is
// told, and keeps the accepted messages.
type receiver struct {
	srv     *httptest.Server
	mu      sync.Mutex
	script  []int
	after   string // Retry-After of scripted answers
	secrets map[string]string
	got     []Message
	calls   int
	bad     []string
}

func newSink(t *testing.T) *receiver {
	s := &receiver{secrets: map[string]string{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if len(s.script) > 0 {
		code := s.script[0]
		s.script = s.script[1:]
		if s.after != "" {
			w.Header().Set("Retry-After", s.after)
		}
		w.WriteHeader(code)
		return
	}
	var m Message
	if err := json.Unmarshal(body, &m); err != nil {
		s.bad = append(s.bad, "undecodable body")
	}
	if sec := s.secrets[r.URL.Path]; sec != "" {
		if err := VerifyWebhook(sec, r.Header, body, time.Now(), 0); err != nil {
			s.bad = append(s.bad, err.Error())
		}
	}
	s.got = append(s.got, m)
}

func (s *receiver) messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.got...)
}

func (s *receiver) callCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func (s *receiver) answer(after string, codes ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script, s.after = codes, after
}

// world is a Deliverer with its stores over one Redis.
type world struct {
	rdb      redis.UniversalClient
	topic    stream.Topic
	subs     *subscriber.Store
	hist     *history.Recorder
	pub      *stream.Publisher
	d        *Deliverer
	now      time.Time
	nowMu    sync.Mutex
	hook     *receiver
	throttle *throttle.Throttle
	settled  atomic.Int64 // messages acknowledged or dead-lettered by the stage
	tel      stream.Telemetry
}

func (w *world) clock() time.Time {
	w.nowMu.Lock()
	defer w.nowMu.Unlock()
	return w.now
}

func (w *world) setNow(t time.Time) {
	w.nowMu.Lock()
	w.now = t
	w.nowMu.Unlock()
}

// fastRunner makes redeliveries quick in tests.
var fastRunner = stream.RunnerConfig{Block: 50 * time.Millisecond, ClaimInterval: 100 * time.Millisecond, ClaimIdle: 2 * time.Second,
	HandlerTimeout: 500 * time.Millisecond, MaxDeliveries: 3, StatsInterval: time.Minute,
	Retry: stream.RetryConfig{MaxRetries: 1, InitialInterval: 20 * time.Millisecond, MaxInterval: 40 * time.Millisecond}}

// fastRetry makes the notifier's retries quick in tests.
var fastRetry = RetryConfig{MaxAttempts: 3, Initial: time.Millisecond, Max: 2 * time.Millisecond, PollInterval: 10 * time.Millisecond}

func newWorld(t *testing.T, rdb redis.UniversalClient, th throttle.Config) *world {
	t.Helper()
	return newWorldWith(t, rdb, th, history.Config{})
}

// newWorldWith is newWorld with a history of the given configuration
// (Partitions > 0 also publishes it to notify.history).
func newWorldWith(t *testing.T, rdb redis.UniversalClient, th throttle.Config, hc history.Config) *world {
	t.Helper()
	w := &world{rdb: rdb, topic: RequestTopic(2), now: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC), hook: newSink(t)}
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	w.tel = stream.Telemetry{TracerProvider: tp, Propagator: propagation.TraceContext{}, Logger: quiet}
	var err error
	if w.subs, err = subscriber.NewStore(rdb, subscriber.StoreConfig{Logger: quiet}); err != nil {
		t.Fatal(err)
	}
	w.pub = stream.NewPublisher(rdb, w.tel)
	if w.hist, err = history.NewRecorder(rdb, w.pub, hc); err != nil {
		t.Fatal(err)
	}
	th.Now = w.clock
	if w.throttle, err = throttle.New(rdb, th); err != nil {
		t.Fatal(err)
	}
	wh, err := NewWebhookChannel(WebhookConfig{Timeout: time.Second, Egress: egresstest.Loopback(t)})
	if err != nil {
		t.Fatal(err)
	}
	w.d, err = NewDeliverer(rdb, w.topic, DeliverDeps{Subscribers: w.subs, Throttle: w.throttle, History: w.hist, Publisher: w.pub,
		Channels: map[string]Channel{ChannelWebhook: wh, ChannelSlack: NewSlackChannel(wh), ChannelLog: NewLogChannel(quiet)}},
		DeliverConfig{Runner: fastRunner, Ledger: DeliveryLedgerConfig{Lease: time.Second}, MaxThrottleWait: 100 * time.Millisecond, Now: w.clock,
			Retry: fastRetry},
		w.tel)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// subscribe creates and confirms a subscriber with one webhook destination
// at path of the sink, and returns its id.
func (w *world) subscribe(t *testing.T, path string, tz string, prefs subscriber.Preferences) string {
	t.Helper()
	ctx := context.Background()
	c, err := w.subs.Create(ctx, subscriber.Subscriber{Name: "s " + path, TimeZone: tz, Preferences: prefs,
		Destinations: []subscriber.Destination{{Kind: subscriber.KindWebhook, Address: w.hook.srv.URL + path}}})
	if err != nil {
		t.Fatal(err)
	}
	d := c.Subscriber.Destinations[0]
	w.hook.mu.Lock()
	w.hook.secrets[path] = d.Secret
	w.hook.mu.Unlock()
	if _, _, err := w.subs.Confirm(ctx, c.ConfirmTokens[d.ID]); err != nil {
		t.Fatal(err)
	}
	return c.Subscriber.ID
}

// run runs the deliver stage until the test ends.
func (w *world) run(t *testing.T) {
	t.Helper()
	st := w.d.Stage()
	h := st.BatchHandler
	st.BatchHandler = func(ctx context.Context, msgs []*stream.Message) error {
		err := h(ctx, msgs)
		var be *stream.BatchError
		if errors.As(err, &be) {
			for _, e := range be.Errs {
				if c := stream.Classify(e); c == stream.OutcomeAcked || c == stream.OutcomeDropped || c == stream.OutcomeDeadLettered {
					w.settled.Add(1)
				}
			}
		}
		return err
	}
	r, err := stream.NewRunner(w.rdb, st, w.tel)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	retries := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	go func() { defer close(retries); _ = w.d.RunRetries(ctx) }()
	t.Cleanup(func() { cancel(); <-done; <-retries })
}

func (w *world) publish(t *testing.T, reqs ...Request) {
	t.Helper()
	if err := PublishRequests(context.Background(), w.pub, w.topic, reqs...); err != nil {
		t.Fatal(err)
	}
}

func req(sub, subject, window string) Request {
	return Request{Flow: "comic", Event: "comic.match", Subject: subject, SubscriberID: sub, Window: window,
		Title: "match " + subject, Payload: json.RawMessage(`{"n":` + strconv.Itoa(len(subject)) + `}`), ObservedAt: time.Now().Add(-time.Second)}
}

// statuses returns the statuses of a subscriber's recent history, oldest
// first.
func (w *world) statuses(t *testing.T, sub string) []string {
	t.Helper()
	recs, err := w.hist.Recent(context.Background(), sub, 100)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(recs))
	for i, r := range recs {
		out[len(recs)-1-i] = r.Status
	}
	return out
}

// waitSettled waits until the stage settled n messages in all.
func (w *world) waitSettled(t *testing.T, n int64) {
	t.Helper()
	testenv.WaitFor(t, waitTimeout, func() bool { return w.settled.Load() >= n }, "%d messages settled (have %v)", n, atEnd[int64](w.settled.Load))
}

// atEnd formats as f's result when formatted: a wait's failure message
// then tells the state at the end of the wait, not at its start.
type atEnd[T any] func() T

func (f atEnd[T]) String() string { return fmt.Sprint(f()) }

// waitDeadLetters waits until the topic holds n dead letters.
func (w *world) waitDeadLetters(t *testing.T, n int64) {
	t.Helper()
	dlq := stream.NewDeadLetters(w.rdb)
	testenv.WaitFor(t, waitTimeout, func() bool {
		c, err := dlq.Count(context.Background(), w.topic)
		return err == nil && c == n
	}, "%d dead letters", n)
}
