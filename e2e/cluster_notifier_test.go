package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/dropstream/dropstream/internal/egress/egresstest"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/history"
	"github.com/dropstream/dropstream/notifier/subscriber"
	"github.com/dropstream/dropstream/notifier/throttle"
	"github.com/dropstream/dropstream/stream"
)

// notifierDelivery runs the notifier's deliver stage and its retry loop on
// the cluster: requests of subscribers in every partition reach a webhook
// that refuses the first sends (503), are retried from the retry schedule,
// and each is delivered exactly once.
func notifierDelivery(t *testing.T, nodes string) {
	const subscribers, subjects, refused = 8, 2, 5
	ctx := context.Background()
	rdb := dial(t, nodes)
	hook := &hookSink{fail: refused}
	srv := httptest.NewServer(hook)
	t.Cleanup(srv.Close)
	tel := quietTel()
	subs, err := subscriber.NewStore(rdb, subscriber.StoreConfig{Logger: tel.Logger})
	if err != nil {
		t.Fatal(err)
	}
	hist, err := history.NewRecorder(rdb, nil, history.Config{})
	if err != nil {
		t.Fatal(err)
	}
	th, err := throttle.New(rdb, throttle.Config{Destination: throttle.Limit{Rate: 1000, Burst: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	wh, err := notifier.NewWebhookChannel(notifier.WebhookConfig{Timeout: time.Second, Egress: egresstest.Loopback(t)})
	if err != nil {
		t.Fatal(err)
	}
	pub := stream.NewPublisher(rdb, tel)
	topic := notifier.RequestTopic(8)
	runner := clusterRunner()
	runner.Consumer = "cluster-deliver"
	d, err := notifier.NewDeliverer(rdb, topic, notifier.DeliverDeps{Subscribers: subs, Throttle: th, History: hist, Publisher: pub,
		Channels: map[string]notifier.Channel{notifier.ChannelWebhook: wh}},
		notifier.DeliverConfig{Runner: runner, Ledger: notifier.DeliveryLedgerConfig{Lease: time.Second},
			Retry: notifier.RetryConfig{MaxAttempts: 10, Initial: time.Millisecond, Max: 5 * time.Millisecond, PollInterval: 10 * time.Millisecond}},
		tel)
	if err != nil {
		t.Fatal(err)
	}
	runStages(t, rdb, d.Stage())
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() { stop(); wg.Wait() })
	wg.Go(func() { _ = d.RunRetries(runCtx) })

	var reqs []notifier.Request
	want := map[string]int{}
	for i := range subscribers {
		c, err := subs.Create(ctx, subscriber.Subscriber{Name: fmt.Sprint("cluster ", i),
			Destinations: []subscriber.Destination{{Kind: subscriber.KindWebhook, Address: fmt.Sprintf("%s/s%d", srv.URL, i)}}})
		if err != nil {
			t.Fatal(err)
		}
		dest := c.Subscriber.Destinations[0]
		if _, _, err := subs.Confirm(ctx, c.ConfirmTokens[dest.ID]); err != nil {
			t.Fatal(err)
		}
		for j := range subjects {
			subject := fmt.Sprintf("item-%d-%d", i, j)
			reqs = append(reqs, notifier.Request{Flow: "comic", Event: "comic.match", Subject: subject, SubscriberID: c.Subscriber.ID,
				Window: "w1", Title: "match " + subject, Payload: json.RawMessage(`{"n":1}`), ObservedAt: time.Now()})
			want[c.Subscriber.ID+"|"+subject] = 1
		}
	}
	if err := notifier.PublishRequests(ctx, pub, topic, reqs...); err != nil {
		t.Fatal(err)
	}
	groups := []group{{topic, notifier.StageDeliver}}
	testenv.WaitFor(t, clusterWait, func() bool { return hook.count() >= len(want) && busy(ctx, rdb, groups) == "" },
		"every request delivered and the deliver group idle")
	got := hook.received()
	if !mapsEqual(got, want) {
		t.Errorf("delivered %v, want each of the %d requests once", got, len(want))
	}
	if n := hook.refusedCount(); n != refused {
		t.Errorf("%d sends refused, want %d (then retried)", n, refused)
	}
	// The same requests again (a producer's retry): the ledger's records,
	// found by the claim script, keep each sent once.
	if err := notifier.PublishRequests(ctx, pub, topic, reqs...); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, clusterWait, func() bool { return busy(ctx, rdb, groups) == "" }, "the republished requests handled")
	if got := hook.received(); !mapsEqual(got, want) {
		t.Errorf("after republishing, delivered %v, want each of the %d requests once", got, len(want))
	}

	// Without buckets, a batch of takes only reads the Retry-After blocks
	// (one ZMSCORE in the {notifier} slot).
	blocks, err := throttle.New(rdb, throttle.Config{Disabled: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := blocks.Block(ctx, "blocked", time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	waits, errs := blocks.TakeMany(ctx, []throttle.Ask{{Dest: "blocked", Channel: "webhook"}, {Dest: "free", Channel: "webhook"}})
	if errs[0] != nil || errs[1] != nil || waits[0] < 50*time.Second || waits[1] != 0 {
		t.Errorf("takes without buckets: waits %v, errors %v; want the blocked destination to wait about a minute", waits, errs)
	}
}

// hookSink is a webhook answering 503 to its first fail requests and
// recording the messages of the others.
type hookSink struct {
	mu      sync.Mutex
	fail    int
	refused int
	got     []notifier.Message
}

func (h *hookSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fail > 0 {
		h.fail--
		h.refused++
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	var m notifier.Message
	if err := json.Unmarshal(body, &m); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.got = append(h.got, m)
}

func (h *hookSink) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.got)
}

func (h *hookSink) refusedCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.refused
}

// received returns "subscriber|subject" → deliveries.
func (h *hookSink) received() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]int{}
	for _, m := range h.got {
		out[m.SubscriberID+"|"+m.Subject]++
	}
	return out
}
