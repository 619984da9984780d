package comic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	gotel "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/dropstream/dropstream/internal/egress/egresstest"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/stream"
)

// streamLen sums the entries of every partition of a topic.
func streamLen(t *testing.T, rdb redis.UniversalClient, topic stream.Topic) int64 {
	t.Helper()
	var n int64
	for p := 0; p < topic.Partitions; p++ {
		l, err := rdb.XLen(context.Background(), topic.Stream(p)).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
		n += l
	}
	return n
}

func TestFlow_notifiesEachMatchingSubscriberOnce(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.Name, func(t *testing.T) {
			ctx := context.Background()
			rdb := be.Client(t)
			rcv := newReceiver(t)
			svc := newService(t, rdb, rcv, nil, StoreConfig{})
			// peter matches by two subscriptions: notified once.
			mustSubscribe(t, svc.Subscriptions, "peter@example.com", `{"publisher":"Marvel"}`)
			mustSubscribe(t, svc.Subscriptions, "peter@example.com", `{"series":"X-Men"}`)
			mustSubscribe(t, svc.Subscriptions, "logan@example.com", `{"series":"X-Men","key_issue":true}`)
			mustSubscribe(t, svc.Subscriptions, "bruce@example.com", `{"publisher":"DC"}`)
			mustSubscribe(t, svc.Subscriptions, "all@example.com", `{}`)
			run(t, rdb, svc.Stages()...)

			xmen, dc := comicN("X-Men", 1, "Marvel", true), comicN("Batman", 1, "DC", true)
			for _, c := range []Comic{xmen, dc} {
				if _, created, err := svc.Inventory.Add(ctx, c); err != nil || !created {
					t.Fatalf("Add = %v, %v; want created", created, err)
				}
			}
			// Listing the same comic again writes nothing and queues no job.
			if l, created, err := svc.Inventory.Add(ctx, xmen); err != nil || created || l.Gen != 1 {
				t.Fatalf("second Add = %+v, %v, %v; want the existing listing", l, created, err)
			}
			want := map[[2]string]int{
				{xmen.ID(), "peter@example.com"}: 1, {xmen.ID(), "logan@example.com"}: 1, {xmen.ID(), "all@example.com"}: 1,
				{dc.ID(), "bruce@example.com"}: 1, {dc.ID(), "all@example.com"}: 1,
			}
			testenv.WaitFor(t, waitTimeout, func() bool { return rcv.count() >= len(want) }, "notifications")
			waitDone(t, svc, xmen.ID(), dc.ID())
			if got := rcv.received(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("received %v\nwant     %v", got, want)
			}
			if n := streamLen(t, rdb, svc.Topics().Jobs); n != 2 {
				t.Errorf("%d jobs, want 2", n)
			}
			hist, err := svc.Delivery.History(ctx, xmen.ID())
			if err != nil || len(hist) != 3 {
				t.Errorf("history of x-men = %v, %v; want 3 emails", hist, err)
			}
			if rcv.count() != len(want) {
				t.Errorf("%d notifications, want %d", rcv.count(), len(want))
			}
			// The jobs and notify streams stay bounded: once acknowledged,
			// the runtime's trimmer (run by `dropstream run`) removes them.
			trim := stream.NewTrimmer(rdb, stream.TrimConfig{MinAge: time.Nanosecond}, quietLogger(), svc.Topics().Jobs, svc.Topics().Notify)
			testenv.WaitFor(t, waitTimeout, func() bool {
				for _, topic := range []stream.Topic{svc.Topics().Jobs, svc.Topics().Notify} {
					for p := 0; p < topic.Partitions; p++ {
						if _, err := trim.TrimStream(ctx, topic.Stream(p)); err != nil {
							t.Fatal(err)
						}
					}
				}
				return streamLen(t, rdb, svc.Topics().Jobs) == 0 && streamLen(t, rdb, svc.Topics().Notify) == 0
			}, "jobs and notify streams trimmed")
		})
	}
}

// handedOff returns the subscription ids of every notification request on
// the notify topic.
func handedOff(t *testing.T, rdb redis.UniversalClient, topic stream.Topic) []string {
	t.Helper()
	var ids []string
	for p := 0; p < topic.Partitions; p++ {
		xs, err := rdb.XRange(context.Background(), topic.Stream(p), "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range xs {
			var r Request
			payload, _ := x.Values["payload"].(string)
			if err := json.Unmarshal([]byte(payload), &r); err != nil {
				t.Fatalf("notify entry %s: %v", x.ID, err)
			}
			ids = append(ids, r.SubscriptionIDs...)
		}
	}
	return ids
}

// waitDone waits until the comics' jobs are matched and delivered.
func waitDone(t *testing.T, svc *Flow, ids ...string) {
	t.Helper()
	for _, id := range ids {
		testenv.WaitFor(t, waitTimeout, func() bool {
			st, err := svc.Inventory.Status(context.Background(), id)
			return err == nil && st.Done
		}, "job of "+id+" done")
	}
}

// crashingHandoff hands off the first chunk of a job only, then "dies": it
// returns an error and stops its runner, leaving the job pending with part
// of its notifications handed off.
type crashingHandoff struct {
	real *streamHandoff
	stop context.CancelFunc
	once sync.Once
	died chan struct{}
}

func (c *crashingHandoff) Handoff(ctx context.Context, job Job, ids []string) (int, error) {
	n, err := c.real.handoffChunk(ctx, job, ids[:c.real.chunk], false)
	if err != nil {
		return n, err
	}
	c.once.Do(func() { c.stop(); close(c.died) })
	return n, errors.New("killed mid-job")
}

// TestMatcher_killedMidJobIsFinishedByAnotherCopy kills a matcher copy
// after it entered the first 3 of 7 matches of a job in the lottery (no
// wave is told before the last chunk): another copy claims the job and
// tells the 7 once, in waves of 4; every subscriber is notified exactly
// once.
func TestMatcher_killedMidJobIsFinishedByAnotherCopy(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.Name, func(t *testing.T) {
			ctx := context.Background()
			rdb := be.Client(t)
			rcv := newReceiver(t)
			svc := newService(t, rdb, rcv, nil, StoreConfig{})
			for i := range 7 {
				mustSubscribe(t, svc.Subscriptions, fmt.Sprintf("fan%d@example.com", i), `{"series":"Saga"}`)
			}
			c := comicN("Saga", 1, "Image", true)
			if _, _, err := svc.Inventory.Add(ctx, c); err != nil {
				t.Fatal(err)
			}
			// Copy A dies mid-job.
			actx, stopA := context.WithCancel(ctx)
			svc.Holds.cfg.WaveSize = 4
			crash := &crashingHandoff{real: &streamHandoff{rdb: rdb, topics: svc.Topics(), chunk: 3, holds: svc.Holds}, stop: stopA, died: make(chan struct{})}
			a := NewMatcher(rdb, svc.Topics(), crash, nil).Stage()
			a.Config = fastConfig("copy-a")
			ra, err := stream.NewRunner(rdb, a, stream.Telemetry{Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			doneA := make(chan struct{})
			go func() { _ = ra.Run(actx); close(doneA) }()
			<-crash.died
			<-doneA
			if ids := handedOff(t, rdb, svc.Topics().Notify); len(ids) != 0 {
				t.Fatalf("%d notifications handed off before the crash (%v), want none", len(ids), ids)
			}
			// Copy B (another consumer) and the delivery stage finish it.
			b := NewMatcher(rdb, svc.Topics(), &streamHandoff{rdb: rdb, topics: svc.Topics(), chunk: 3, holds: svc.Holds}, nil).Stage()
			b.Config = fastConfig("copy-b")
			run(t, rdb, b, svc.Delivery.Stage())
			waitDone(t, svc, c.ID())
			if ids := handedOff(t, rdb, svc.Topics().Notify); len(ids) != 4 {
				t.Fatalf("first wave %v, want 4 subscriptions", ids)
			}
			svc.Holds.now = func() time.Time { return time.Now().Add(time.Hour) }
			if n, err := svc.Holds.Advance(ctx); err != nil || n != 1 {
				t.Fatalf("Advance after the hold = %d, %v; want the second wave told", n, err)
			}
			waitDone(t, svc, c.ID())
			if ids := handedOff(t, rdb, svc.Topics().Notify); len(ids) != 7 || len(slices.Compact(slices.Sorted(slices.Values(ids)))) != 7 {
				t.Errorf("handed off %v in all, want the 7 subscriptions once each", ids)
			}
			got := rcv.received()
			if len(got) != 7 || rcv.count() != 7 {
				t.Errorf("received %v (%d), want 7 emails once each", got, rcv.count())
			}
		})
	}
}

// TestDelivery_retriesAFailingDestinationAndSendsOnce: the /notify
// endpoint answers 503 twice; the delivery is retried and arrives once.
func TestDelivery_retriesAFailingDestinationAndSendsOnce(t *testing.T) {
	rdb := backends()[1].Client(t)
	rcv := newReceiver(t)
	rcv.fail = 2
	svc := newService(t, rdb, rcv, nil, StoreConfig{})
	mustSubscribe(t, svc.Subscriptions, "a@example.com", `{"year":1990}`)
	run(t, rdb, svc.Stages()...)
	c := comicN("Sandman", 1, "Vertigo", true)
	if _, _, err := svc.Inventory.Add(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	waitDone(t, svc, c.ID())
	if got := rcv.received(); rcv.count() != 1 || got[[2]string{c.ID(), "a@example.com"}] != 1 {
		t.Errorf("received %v, want one notification", got)
	}
}

// TestDelivery_relaysToTheNotifierRequestPath: with a Relay, each
// notification becomes one valid notifier.Request with an inline
// comic_notify destination and a window per (comic, gen, email); the
// history records it and nothing is sent directly.
func TestDelivery_relaysToTheNotifierRequestPath(t *testing.T) {
	ctx := context.Background()
	registerNotifyKind(t)
	rdb := backends()[0].Client(t)
	rcv := newReceiver(t)
	var mu sync.Mutex
	var got []notifier.Request
	cfg := Config{Partitions: 2, Webhook: notifier.WebhookConfig{Egress: egresstest.Loopback(t)}, Delivery: DeliveryConfig{NotifyURL: rcv.URL(), NotifySecret: testSecret,
		Relay: func(_ context.Context, reqs ...notifier.Request) error {
			for _, r := range reqs {
				if err := r.Validate(); err != nil {
					return err
				}
			}
			mu.Lock()
			defer mu.Unlock()
			got = append(got, reqs...)
			return nil
		}}}
	svc, err := NewWith(rdb, cfg, nil, stream.Telemetry{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	mustSubscribe(t, svc.Subscriptions, "a@example.com", `{"series":"Bone"}`)
	mustSubscribe(t, svc.Subscriptions, "b@example.com", `{"publisher":"Cartoon Books"}`)
	run(t, rdb, svc.Stages()...)
	c := comicN("Bone", 1, "Cartoon Books", true)
	if _, _, err := svc.Inventory.Add(ctx, c); err != nil {
		t.Fatal(err)
	}
	waitDone(t, svc, c.ID())
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[0].Window == got[1].Window || rcv.count() != 0 {
		t.Fatalf("relayed %+v, sent directly %d; want 2 requests with distinct windows and no direct send", got, rcv.count())
	}
	for _, r := range got {
		if r.Flow != Name || r.Subject != c.ID() || r.Destination == nil || r.Destination.Address != rcv.URL() {
			t.Errorf("request %+v: want the comic's subject and the flow's /notify destination", r)
		}
	}
	hist, err := svc.Delivery.History(ctx, c.ID())
	if err != nil || len(hist) != 2 || hist["a@example.com"].Channel != ChannelNotifier {
		t.Errorf("history %v, %v; want both emails via the notifier", hist, err)
	}
}

// TestFlow_traceTravelsFromIntakeToTheNotifyStream: the intake's trace
// continues on the job and on the notification request (with no
// propagator configured: the global one is used).
func TestFlow_traceTravelsFromIntakeToTheNotifyStream(t *testing.T) {
	ctx := context.Background()
	rdb := backends()[0].Client(t)
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(ctx) })
	prev := gotel.GetTextMapPropagator()
	gotel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { gotel.SetTextMapPropagator(prev) })
	svc, err := NewWith(rdb, Config{Partitions: 2}, nil, stream.Telemetry{TracerProvider: tp, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	mustSubscribe(t, svc.Subscriptions, "a@example.com", `{}`)
	sctx, span := tp.Tracer("test").Start(ctx, "intake")
	c := comicN("Maus", 1, "Pantheon", true)
	if _, _, err := svc.Inventory.Add(sctx, c); err != nil {
		t.Fatal(err)
	}
	span.End()
	want := span.SpanContext().TraceID().String()
	for _, s := range svc.Stages() {
		s.Config = fastConfig(s.Name)
		r, err := stream.NewRunner(rdb, s, stream.Telemetry{TracerProvider: tp, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { _ = r.Run(rctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	waitDone(t, svc, c.ID())
	for _, topic := range []stream.Topic{svc.Topics().Jobs, svc.Topics().Notify} {
		p := topic.Partition(c.ID())
		xs, err := rdb.XRange(ctx, topic.Stream(p), "-", "+").Result()
		if err != nil || len(xs) != 1 {
			t.Fatalf("%s: %d entries, %v; want 1", topic, len(xs), err)
		}
		tp, _ := xs[0].Values["traceparent"].(string)
		if len(tp) < 36 || tp[3:35] != want {
			t.Errorf("%s traceparent %q, want trace %s", topic, tp, want)
		}
	}
}

// TestInventory_failedIntakeWritesNothing: when the store fails in the
// middle of an intake (here the comic's jobs stream key holds a string,
// so appending its job would fail), Add returns an error and nothing of
// the comic is written: no inventory entry, no generation, no job, no
// event. Once the store works again the same comic is listed whole.
func TestInventory_failedIntakeWritesNothing(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.Name, func(t *testing.T) {
			ctx := context.Background()
			rdb := be.Client(t)
			svc := newService(t, rdb, nil, nil, StoreConfig{})
			c := comicN("Preacher", 1, "Vertigo", true)
			jobs := svc.Topics().Jobs.Stream(svc.Topics().Jobs.Partition(c.ID()))
			if err := rdb.Set(ctx, jobs, "not a stream", 0).Err(); err != nil {
				t.Fatal(err)
			}
			if _, _, err := svc.Inventory.Add(ctx, c); err == nil {
				t.Fatal("Add over a broken jobs stream succeeded, want an error")
			}
			if _, err := svc.Inventory.Get(ctx, c.ID()); !errors.Is(err, ErrNotFound) {
				t.Errorf("comic in inventory after a failed intake: %v", err)
			}
			if _, err := svc.Inventory.Status(ctx, c.ID()); !errors.Is(err, ErrNotFound) {
				t.Errorf("status after a failed intake = %v, want never listed", err)
			}
			if n := streamLen(t, rdb, svc.Topics().Events); n != 0 {
				t.Errorf("%d events after a failed intake, want 0", n)
			}
			if err := rdb.Del(ctx, jobs).Err(); err != nil {
				t.Fatal(err)
			}
			if l, created, err := svc.Inventory.Add(ctx, c); err != nil || !created || l.Gen != 1 {
				t.Fatalf("Add after the repair = %+v, %v, %v; want generation 1", l, created, err)
			}
			if n := streamLen(t, rdb, svc.Topics().Jobs); n != 1 {
				t.Errorf("%d jobs, want 1", n)
			}
		})
	}
}

// TestDelivery_subscriberOwnDestination: a subscription with its own
// notify_url is notified there, signed with its own secret; the others go
// to the flow's POST /notify destination.
func TestDelivery_subscriberOwnDestination(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.Name, func(t *testing.T) {
			ctx := context.Background()
			rdb := be.Client(t)
			flowDest, own := newReceiver(t), newReceiver(t)
			svc := newService(t, rdb, flowDest, nil, StoreConfig{})
			sub, err := svc.Subscriptions.Create(ctx, "own@example.com", []byte(`{"series":"Bone"}`), own.URL())
			if err != nil || sub.Secret == "" {
				t.Fatalf("Create with a notify_url = %+v, %v; want a secret", sub, err)
			}
			own.mu.Lock()
			own.secret = sub.Secret
			own.mu.Unlock()
			mustSubscribe(t, svc.Subscriptions, "flow@example.com", `{"series":"Bone"}`)
			run(t, rdb, svc.Stages()...)
			c := comicN("Bone", 1, "Cartoon Books", true)
			if _, _, err := svc.Inventory.Add(ctx, c); err != nil {
				t.Fatal(err)
			}
			waitDone(t, svc, c.ID())
			testenv.WaitFor(t, waitTimeout, func() bool { return own.count()+flowDest.count() >= 2 }, "notifications")
			if got := own.received(); own.count() != 1 || got[[2]string{c.ID(), "own@example.com"}] != 1 {
				t.Errorf("own destination received %v, want own@example.com once", got)
			}
			if got := flowDest.received(); flowDest.count() != 1 || got[[2]string{c.ID(), "flow@example.com"}] != 1 {
				t.Errorf("flow destination received %v, want flow@example.com once", got)
			}
		})
	}
}
