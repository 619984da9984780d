package watch

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/internal/egress/egresstest"
	"github.com/dropstream/dropstream/internal/telemetrytest"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/stream"
)

// receiver is a webhook endpoint per path: it verifies signatures, answers
// with the status its script gives, and records what it accepted.
type receiver struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	secrets  map[string]string        // path → watcher secret
	holds    map[string]chan struct{} // path → closed when its requests may be answered
	status   func(path string, hit int) int
	hits     map[string]int         // path → requests
	accepted map[string][]OpenEvent // path → events answered 2xx
	bad      []string               // signature or header problems
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{t: t, secrets: map[string]string{}, holds: map[string]chan struct{}{}, hits: map[string]int{}, accepted: map[string][]OpenEvent{},
		status: func(string, int) int { return http.StatusOK }}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	path := strings.TrimPrefix(req.URL.Path, "/")
	r.mu.Lock()
	r.hits[path]++
	hold := r.holds[path]
	r.mu.Unlock()
	if hold != nil {
		<-hold
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if wh, err := standardwebhooks.NewWebhook(r.secrets[path]); err != nil {
		r.bad = append(r.bad, fmt.Sprintf("%s: %v", path, err))
	} else if err := wh.Verify(body, req.Header); err != nil {
		r.bad = append(r.bad, fmt.Sprintf("%s: %v", path, err))
	}
	var ev OpenEvent
	if err := json.Unmarshal(body, &ev); err != nil || req.Header.Get(notifier.HeaderWebhookID) != ev.EventID || ev.WatcherID == "" {
		r.bad = append(r.bad, fmt.Sprintf("%s: body %s, event id header %q", path, body, req.Header.Get(notifier.HeaderWebhookID)))
	}
	code := r.status(path, r.hits[path])
	if code/100 == 2 {
		r.accepted[path] = append(r.accepted[path], ev)
	}
	w.WriteHeader(code)
	_, _ = fmt.Fprintf(w, "answer %d to %s", code, path)
}

// hold keeps the requests to path unanswered until release is called.
// The held requests are released when the test ends too, so a test that
// fails while holding one does not hang in its server's Close.
func (r *receiver) hold(path string) (release func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := make(chan struct{})
	r.holds[path] = c
	release = sync.OnceFunc(func() { close(c) })
	r.t.Cleanup(release)
	return release
}

// setStatus replaces the answer script.
func (r *receiver) setStatus(f func(path string, hit int) int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status = f
}

func (r *receiver) counts(path string) (hits, accepted int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hits[path], len(r.accepted[path])
}

func (r *receiver) events(path string) []OpenEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]OpenEvent(nil), r.accepted[path]...)
}

func (r *receiver) checkSignatures() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.bad {
		r.t.Error(b)
	}
}

// pipeline is a running notifier stage with its store, receiver and
// metrics.
type pipeline struct {
	t       *testing.T
	rdb     redis.UniversalClient
	topics  avail.Topics
	store   *Store
	recv    *receiver
	pub     *stream.Publisher
	collect func() metricdata.ResourceMetrics
	logged  *countingChannel
}

// countingChannel is the log channel plus a count of its sends.
type countingChannel struct {
	*notifier.LogChannel
	mu sync.Mutex
	n  map[string]int // recipient → sends
}

func (c *countingChannel) Send(ctx context.Context, n notifier.Notification) error {
	c.mu.Lock()
	c.n[n.Recipient.ID]++
	c.mu.Unlock()
	return c.LogChannel.Send(ctx, n)
}

func (c *countingChannel) sends(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[id]
}

// testRunner is a runner config fast enough for tests: in-process retries
// 10-20ms apart, redelivery after 2s idle, 3 deliveries.
func testRunner() stream.RunnerConfig {
	return stream.RunnerConfig{Block: 50 * time.Millisecond, ClaimInterval: 50 * time.Millisecond, ClaimIdle: 2 * time.Second,
		HandlerTimeout: 500 * time.Millisecond, MaxDeliveries: 3, StatsInterval: time.Hour,
		Retry: stream.RetryConfig{MaxRetries: 2, InitialInterval: 10 * time.Millisecond, MaxInterval: 20 * time.Millisecond}}
}

// startPipeline runs the stage against rdb until the test ends.
func startPipeline(t *testing.T, rdb redis.UniversalClient, runner stream.RunnerConfig) *pipeline {
	t.Helper()
	return startPipelineWith(t, rdb, runner, Config{})
}

// startPipelineWith is startPipeline with the other fields of cfg (History,
// Throttle).
func startPipelineWith(t *testing.T, rdb redis.UniversalClient, runner stream.RunnerConfig, cfg Config) *pipeline {
	t.Helper()
	return startPipelineTimeout(t, rdb, runner, cfg, 300*time.Millisecond)
}

// startPipelineTimeout is startPipelineWith with the webhooks' timeout.
func startPipelineTimeout(t *testing.T, rdb redis.UniversalClient, runner stream.RunnerConfig, cfg Config, webhookTimeout time.Duration) *pipeline {
	t.Helper()
	mp, collect := telemetrytest.Metrics(t)
	tel := stream.Telemetry{MeterProvider: mp, Logger: quiet}
	store, err := NewStore(rdb, StoreConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	recv := newReceiver(t)
	// The webhooks may reach the test's receiver, on loopback.
	webhook, err := notifier.NewWebhookChannel(notifier.WebhookConfig{Timeout: webhookTimeout, Egress: egresstest.Allow(t, recv.srv.URL)})
	if err != nil {
		t.Fatal(err)
	}
	logged := &countingChannel{LogChannel: notifier.NewLogChannel(quiet), n: map[string]int{}}
	p := &pipeline{t: t, rdb: rdb, topics: avail.NewTopics(2), store: store, recv: recv,
		pub: stream.NewPublisher(rdb, tel), collect: collect, logged: logged}
	stage, err := NewStage(rdb, p.topics, store, map[string]notifier.Channel{notifier.ChannelWebhook: webhook, notifier.ChannelLog: logged},
		Config{Runner: runner, Ledger: notifier.DeliveryLedgerConfig{Lease: time.Second}, History: cfg.History, Throttle: cfg.Throttle, Sources: cfg.Sources}, tel)
	if err != nil {
		t.Fatalf("NewStage: %v", err)
	}
	r, err := stream.NewRunner(rdb, stage, tel)
	if err != nil {
		t.Fatalf("NewRunner: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		p.recv.checkSignatures()
	})
	return p
}

// webhookWatcher creates a webhook watcher posting to the receiver's path
// name; edit sets its filters.
func (p *pipeline) webhookWatcher(name string, edit func(*Watcher)) Watcher {
	p.t.Helper()
	w := Watcher{Name: name, Channel: notifier.ChannelWebhook, WebhookURL: p.recv.srv.URL + "/" + name}
	edit(&w)
	created, err := p.store.Create(context.Background(), w)
	if err != nil {
		p.t.Fatalf("Create %s: %v", name, err)
	}
	p.recv.mu.Lock()
	p.recv.secrets[name] = created.Secret
	p.recv.mu.Unlock()
	return created
}

// t0 is the time of run 0; run n is n minutes later.
var t0 = time.Date(2025, 7, 1, 18, 0, 0, 0, time.UTC)

func runID(n int) string { return fmt.Sprintf("run-%04d", n) }

// flip is a transition as the diff writes it.
type flip struct {
	avail.Transition
	Raw bool `json:"raw,omitempty"`
}

// rawFlip is a raw transition of e in run n; stableFlip its confirmation.
func rawFlip(e avail.Entity, kind string, n int) flip {
	return flip{Transition: transitionOf(e, kind, n, false, false), Raw: true}
}

func stableFlip(e avail.Entity, kind string, n int, notify bool) flip {
	return flip{Transition: transitionOf(e, kind, n, true, notify)}
}

func transitionOf(e avail.Entity, kind string, n int, stable, notify bool) avail.Transition {
	if kind == avail.KindClose {
		e, _ = avail.ParseKey(e.Key)
	}
	return avail.Transition{EventID: avail.EventID(runID(n), e.Key, kind, stable), Entity: e,
		ScopeKey: "src|" + e.Venue + "|" + e.Date + "|2|", SourceID: "src", Kind: kind, Stable: stable, Notify: notify,
		RunID: runID(n), RunAt: t0.Add(time.Duration(n) * time.Minute), TraceID: fmt.Sprintf("%032x", n+1)}
}

// publish appends flips to the transitions topic, keyed by scope.
func (p *pipeline) publish(flips ...flip) {
	p.t.Helper()
	msgs := make([]*stream.Message, len(flips))
	for i, f := range flips {
		body, err := json.Marshal(f)
		if err != nil {
			p.t.Fatal(err)
		}
		msgs[i] = stream.NewMessage(f.ScopeKey, avail.TypeTransition, body)
	}
	if err := p.pub.Publish(context.Background(), p.topics.Transitions, msgs...); err != nil {
		p.t.Fatalf("publish: %v", err)
	}
}

// settled waits until the stage has handled n messages for good (acked
// or dead-lettered).
func (p *pipeline) settled(n int64) {
	p.t.Helper()
	testenv.WaitFor(p.t, waitTimeout, func() bool {
		rm := p.collect()
		return p.stageMessages(rm, "acked")+p.stageMessages(rm, "dead_lettered") >= n
	}, "stage settles %d messages", n)
}

func (p *pipeline) stageMessages(rm metricdata.ResourceMetrics, outcome string) int64 {
	return telemetrytest.CounterSum(rm, "dropstream.stage.messages", map[string]string{"stage": StageNotifier, "outcome": outcome})
}

func (p *pipeline) notifications(outcome string) int64 {
	return telemetrytest.CounterSum(p.collect(), notifier.MetricNotifications, map[string]string{"outcome": outcome})
}

func (p *pipeline) deadLetters() []stream.DeadLetter {
	p.t.Helper()
	dls, err := stream.NewDeadLetters(p.rdb).List(context.Background(), p.topics.Transitions, 100)
	if err != nil {
		p.t.Fatal(err)
	}
	return dls
}
