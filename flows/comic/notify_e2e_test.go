package comic

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

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/egress/egresstest"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/subscriber"
	"github.com/dropstream/dropstream/stream"
)

// notifyEndpoint is the comic flow's POST /notify destination as the
// notifier calls it: a signed notifier.Message whose payload is the
// NotifyBody. It answers 503 to the first fail requests.
type notifyEndpoint struct {
	srv  *httptest.Server
	mu   sync.Mutex
	got  []NotifyBody
	bad  []string
	fail int
}

func newNotifyEndpoint(t *testing.T, fail int) *notifyEndpoint {
	e := &notifyEndpoint{fail: fail}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		e.mu.Lock()
		defer e.mu.Unlock()
		if r.Method != http.MethodPost || r.URL.Path != "/notify" {
			e.bad = append(e.bad, r.Method+" "+r.URL.Path)
		}
		if err := verify(testSecret, r.Header, body); err != nil {
			e.bad = append(e.bad, "signature: "+err.Error())
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		if e.fail > 0 {
			e.fail--
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		var m notifier.Message
		var n NotifyBody
		if err := json.Unmarshal(body, &m); err != nil || m.Flow != Name || json.Unmarshal(m.Payload, &n) != nil {
			e.bad = append(e.bad, "undecodable: "+string(body))
			return
		}
		e.got = append(e.got, n)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *notifyEndpoint) received() (map[[2]string]int, int, []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[[2]string]int{}
	for _, n := range e.got {
		out[[2]string{n.ComicID, n.Email}]++
	}
	return out, len(e.got), append([]string(nil), e.bad...)
}

// TestNotify_endToEndThroughTheNotifierExactlyOnce: on a real
// redis-server, comics matched by the comic flow are relayed to the
// notifier's request topic and delivered by the "notifier-deliver" stage
// to the flow's POST /notify destination: each (comic, subscriber) arrives
// exactly once, although every request is relayed twice (as after a
// redelivery of the comic-delivery stage between its relay and its
// acknowledgement) and a subscriber matches by two subscriptions.
func TestNotify_endToEndThroughTheNotifierExactlyOnce(t *testing.T) {
	ctx := context.Background()
	registerNotifyKind(t)
	rdb := testenv.Dial(t, testenv.RedisURL(t))
	tel := stream.Telemetry{Logger: quietLogger()}
	ep := newNotifyEndpoint(t, 0)
	const partitions = 2
	requests := notifier.RequestTopic(partitions)
	pub := stream.NewPublisher(rdb, tel)
	cfg := Config{Partitions: partitions, Delivery: DeliveryConfig{NotifyURL: ep.srv.URL + "/notify", NotifySecret: testSecret,
		Relay: func(ctx context.Context, reqs ...notifier.Request) error {
			return notifier.PublishRequests(ctx, pub, requests, append(reqs, reqs...)...)
		}}}
	svc, err := NewWith(rdb, cfg, nil, tel)
	if err != nil {
		t.Fatal(err)
	}
	subs, err := subscriber.NewStore(rdb, subscriber.StoreConfig{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	channels, err := notifier.NewChannels(notifier.WebhookConfig{Egress: egresstest.Allow(t, ep.srv.URL)}, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	d, err := notifier.NewDeliverer(rdb, requests, notifier.DeliverDeps{Subscribers: subs, Channels: channels, Publisher: pub},
		notifier.DeliverConfig{Ledger: notifier.DeliveryLedgerConfig{Lease: 2 * time.Second}, Runner: stream.RunnerConfig{
			Block: 50 * time.Millisecond, HandlerTimeout: time.Second, ClaimIdle: 8 * time.Second, ClaimInterval: 500 * time.Millisecond,
			MaxDeliveries: 50, Retry: stream.RetryConfig{MaxRetries: 4, InitialInterval: 10 * time.Millisecond, MaxInterval: 50 * time.Millisecond}}}, tel)
	if err != nil {
		t.Fatal(err)
	}
	mustSubscribe(t, svc.Subscriptions, "ann@example.com", `{"series":"Hellboy"}`)
	mustSubscribe(t, svc.Subscriptions, "ann@example.com", `{"publisher":"Dark Horse"}`) // ann matches twice
	mustSubscribe(t, svc.Subscriptions, "ben@example.com", `{"publisher":"Dark Horse","key_issue":true}`)
	mustSubscribe(t, svc.Subscriptions, "cat@example.com", `{"series":"Usagi Yojimbo"}`)
	deliver := d.Stage()
	deliver.Config.Consumer, deliver.Config.Block = "deliver-main", 50*time.Millisecond
	run(t, rdb, append(svc.Stages(), deliver)...)

	hellboy, usagi := comicN("Hellboy", 1, "Dark Horse", true), comicN("Usagi Yojimbo", 1, "Fantagraphics", false)
	for _, c := range []Comic{hellboy, usagi} {
		if _, _, err := svc.Inventory.Add(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	want := map[[2]string]int{{hellboy.ID(), "ann@example.com"}: 1, {hellboy.ID(), "ben@example.com"}: 1, {usagi.ID(), "cat@example.com"}: 1}
	testenv.WaitFor(t, time.Minute, func() bool { _, n, _ := ep.received(); return n >= len(want) }, "notifications at /notify")
	waitDone(t, svc, hellboy.ID(), usagi.ID())
	// Every request relayed (twice each) is acknowledged by the notifier.
	testenv.WaitFor(t, waitTimeout, func() bool {
		n, err := backlogOf(ctx, rdb, requests, notifier.StageDeliver)
		return err == nil && n == 0
	}, "notifier backlog")
	got, n, bad := ep.received()
	if len(bad) > 0 {
		t.Errorf("bad requests at /notify: %v", bad)
	}
	if n != len(want) || len(got) != len(want) {
		t.Fatalf("received %v (%d requests), want %v", got, n, want)
	}
	for k, c := range want {
		if got[k] != c {
			t.Errorf("%v received %d times, want %d", k, got[k], c)
		}
	}
	if l := streamLen(t, rdb, requests); l != 2*int64(len(want)) {
		t.Errorf("%d requests relayed, want %d (each twice)", l, 2*len(want))
	}
}

// backlogOf is what group has not acknowledged on topic: its lag plus
// its pending entries.
func backlogOf(ctx context.Context, rdb redis.UniversalClient, topic stream.Topic, group string) (int64, error) {
	var n int64
	for p := 0; p < topic.Partitions; p++ {
		groups, err := rdb.XInfoGroups(ctx, topic.Stream(p)).Result()
		if err != nil {
			return 0, err
		}
		found := false
		for _, g := range groups {
			if g.Name == group {
				found = true
				n += g.Pending + g.Lag
			}
		}
		if !found {
			return 0, fmt.Errorf("no group %s on %s", group, topic.Stream(p))
		}
	}
	return n, nil
}
