package notifier

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/notifier/history"
	"github.com/dropstream/dropstream/notifier/subscriber"
	"github.com/dropstream/dropstream/notifier/throttle"
	"github.com/dropstream/dropstream/stream"
)

func TestDeliver_exactlyOncePerSubjectAndWindow(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			w := newWorld(t, b.client(t), throttle.Config{Disabled: true})
			sub := w.subscribe(t, "/a", "", subscriber.Preferences{})
			w.run(t)
			// The same (subject, window) published three times (a producer's
			// retries, a replay), another subject, and another window.
			w.publish(t, req(sub, "comic:1", "w1"), req(sub, "comic:1", "w1"), req(sub, "comic:2", "w1"), req(sub, "comic:1", "w1"), req(sub, "comic:1", "w2"))
			w.waitSettled(t, 5)
			got := w.hook.messages()
			var keys []string
			for _, m := range got {
				keys = append(keys, m.Subject+"/"+m.Window)
			}
			slices.Sort(keys)
			if !slices.Equal(keys, []string{"comic:1/w1", "comic:1/w2", "comic:2/w1"}) || len(w.hook.bad) > 0 {
				t.Fatalf("received %v (bad: %v), want each (subject, window) once", keys, w.hook.bad)
			}
			if m := got[0]; m.SubscriberID != sub || m.TraceID == "" || m.UnsubscribeURL == "" || string(m.Payload) == "" {
				t.Fatalf("message %+v lacks subscriber, trace, unsubscribe link or payload", m)
			}
			if st := w.statuses(t, sub); !slices.Equal(st, []string{"sent", "sent", "sent"}) {
				t.Fatalf("history %v, want 3 sent", st)
			}
			rec, err := w.hist.Get(context.Background(), got[0].ID)
			if err != nil || rec.Status != history.StatusSent || rec.TraceID != got[0].TraceID || rec.LatencyMs < 1000 {
				t.Fatalf("record %+v, %v: want sent, with the trace and latency from observation", rec, err)
			}
		})
	}
}

// A copy that sent a notification and died before acknowledging the
// message leaves it pending; the copy that claims it finds the ledger's
// "sent" record and does not send again.
func TestDeliver_crashBetweenSendAndAck(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			w := newWorld(t, b.client(t), throttle.Config{Disabled: true})
			sub := w.subscribe(t, "/a", "", subscriber.Preferences{})
			w.publish(t, req(sub, "comic:1", "w1"))
			p := w.topic.Partition(sub)
			if err := stream.EnsureGroups(ctx, w.rdb, w.topic, StageDeliver); err != nil {
				t.Fatal(err)
			}
			// The doomed copy reads the message and sends it, but never acks.
			xs, err := w.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: StageDeliver, Consumer: "doomed",
				Streams: []string{w.topic.Stream(p), ">"}, Count: 1}).Result()
			if err != nil || len(xs) != 1 || len(xs[0].Messages) != 1 {
				t.Fatalf("read: %v %v", xs, err)
			}
			m := &stream.Message{ID: xs[0].Messages[0].ID, Stream: w.topic.Stream(p), Partition: p, Type: TypeRequest, Attempt: 1,
				Payload: []byte(xs[0].Messages[0].Values["payload"].(string))}
			if err := w.d.handle(ctx, m); err != nil {
				t.Fatal(err)
			}
			// A live copy claims it once idle, and the ledger decides.
			w.run(t)
			w.waitSettled(t, 1)
			if n := len(w.hook.messages()); n != 1 {
				t.Fatalf("received %d notifications, want 1", n)
			}
			testenv.WaitFor(t, waitTimeout, func() bool {
				pending, err := w.rdb.XPending(ctx, w.topic.Stream(p), StageDeliver).Result()
				return err == nil && pending.Count == 0
			}, "the claimed message is acknowledged")
		})
	}
}

func TestDeliver_webhookFailuresRetryThenDeadLetterThenReplay(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			w := newWorld(t, b.client(t), throttle.Config{Disabled: true})
			sub := w.subscribe(t, "/a", "", subscriber.Preferences{})
			w.run(t)
			// Two 503s: each attempt is acknowledged and comes back from the
			// retry schedule; the third is sent.
			w.hook.answer("", 503, 503)
			w.publish(t, req(sub, "comic:1", "w1"))
			w.waitSettled(t, 3)
			testenv.WaitFor(t, waitTimeout, func() bool { return len(w.statuses(t, sub)) == 3 }, "3 history records")
			recs, err := w.hist.Recent(ctx, sub, 10)
			if err != nil || len(recs) != 3 {
				t.Fatalf("history %+v, %v: want 3 records", recs, err)
			}
			for i, want := range []struct {
				status   string
				attempts int
			}{{"sent", 3}, {"failed", 2}, {"failed", 1}} {
				if recs[i].Status != want.status || recs[i].Attempts != want.attempts {
					t.Fatalf("record %d: %s after %d attempts, want %s after %d", i, recs[i].Status, recs[i].Attempts, want.status, want.attempts)
				}
			}
			// A 400 is permanent: dead-lettered at once, never sent.
			w.hook.answer("", 400)
			w.publish(t, req(sub, "comic:2", "w1"))
			w.waitSettled(t, 4)
			w.waitDeadLetters(t, 1)
			dlq := stream.NewDeadLetters(w.rdb)
			// The receiver is fixed: a replay sends it once; replaying the
			// already-sent message again sends nothing.
			if n, err := dlq.Replay(ctx, w.topic); err != nil || n != 1 {
				t.Fatalf("replay %d, %v", n, err)
			}
			w.waitSettled(t, 5)
			w.publish(t, req(sub, "comic:2", "w1"), req(sub, "comic:1", "w1"))
			w.waitSettled(t, 7)
			var subjects []string
			for _, m := range w.hook.messages() {
				subjects = append(subjects, m.Subject)
			}
			if !slices.Equal(subjects, []string{"comic:1", "comic:2"}) {
				t.Fatalf("received %v, want comic:1 then comic:2, once each", subjects)
			}
			if st := w.statuses(t, sub); !slices.Equal(st, []string{"failed", "failed", "sent", "rejected", "sent"}) {
				t.Fatalf("history %v", st)
			}
		})
	}
}

// Retryable failures that never end are retried MaxAttempts times in
// all, then dead-lettered with the count; a replay starts again from the
// first attempt and sends once. Also on Redis Cluster: the ledger, retry
// schedule and dead-letter keys of a partition share its slot.
func TestDeliver_retriesRunOutIntoDeadLetter(t *testing.T) {
	for _, b := range testenv.WithCluster() {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			w := newWorld(t, b.Client(t), throttle.Config{Disabled: true})
			sub := w.subscribe(t, "/a", "", subscriber.Preferences{})
			w.hook.answer("", 500, 500, 500, 500)
			w.run(t)
			w.publish(t, req(sub, "comic:1", "w1"))
			w.waitDeadLetters(t, 1)
			// MaxAttempts 3: three sends, all refused.
			if calls := w.hook.callCount(); calls != 3 || len(w.hook.messages()) != 0 {
				t.Fatalf("%d calls, %d accepted; want 3 and 0", calls, len(w.hook.messages()))
			}
			if st := w.statuses(t, sub); !slices.Equal(st, []string{"failed", "failed", "rejected"}) {
				t.Fatalf("history %v, want failed, failed, rejected", st)
			}
			dlq := stream.NewDeadLetters(w.rdb)
			dls, err := dlq.List(ctx, w.topic, 10)
			if err != nil || len(dls) != 1 {
				t.Fatalf("dead letters %+v, %v", dls, err)
			}
			if dl := dls[0]; !strings.Contains(dl.Reason, "gave up after 3 attempts") || dl.Message.Metadata[MetaAttempt] != "" {
				t.Fatalf("dead letter reason %q, attempt %q: want the count, and no attempt left on the message", dl.Reason, dl.Message.Metadata[MetaAttempt])
			}
			schedule, entries := w.d.retryKeys(w.topic.Partition(sub))
			if n, err := w.rdb.Exists(ctx, schedule, entries).Result(); err != nil || n != 0 {
				t.Fatalf("retry schedule keys left: %d, %v", n, err)
			}
			// The receiver recovers (one more 500 first): the replay is
			// retried from attempt 1 and sent once.
			w.hook.answer("", 500)
			if n, err := dlq.Replay(ctx, w.topic); err != nil || n != 1 {
				t.Fatalf("replay %d, %v", n, err)
			}
			want := []string{"failed", "failed", "rejected", "failed", "sent"}
			testenv.WaitFor(t, waitTimeout, func() bool { return slices.Equal(w.statuses(t, sub), want) },
				"history %v, want the replay failed once, then sent", w.statuses(t, sub))
			if n := len(w.hook.messages()); n != 1 {
				t.Fatalf("received %d, want 1", n)
			}
			if calls := w.hook.callCount(); calls != 5 {
				t.Fatalf("%d calls, want 5", calls)
			}
		})
	}
}

func TestDeliver_throttleHonoursRetryAfter(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, mini(t), throttle.Config{Destination: throttle.Limit{Rate: 1000, Burst: 1000}})
	sub := w.subscribe(t, "/a", "", subscriber.Preferences{})
	w.hook.answer("120", 429)
	m := &stream.Message{ID: "1-1", Partition: w.topic.Partition(sub), Type: TypeRequest, Attempt: 1}
	err := w.d.Deliver(ctx, m, req(sub, "comic:1", "w1"))
	if err == nil || stream.IsPermanent(err) {
		t.Fatalf("429: %v, want a retryable error", err)
	}
	// The destination is blocked for Retry-After: the next try does not
	// reach the receiver.
	err = w.d.Deliver(ctx, m, req(sub, "comic:1", "w1"))
	if !errors.Is(err, ErrThrottled) {
		t.Fatalf("within Retry-After: %v, want ErrThrottled", err)
	}
	w.hook.mu.Lock()
	calls := w.hook.calls
	w.hook.mu.Unlock()
	if calls != 1 {
		t.Fatalf("receiver called %d times, want 1", calls)
	}
	w.setNow(w.clock().Add(121 * time.Second))
	if err := w.d.Deliver(ctx, m, req(sub, "comic:1", "w1")); err != nil {
		t.Fatalf("after Retry-After: %v", err)
	}
	if n := len(w.hook.messages()); n != 1 {
		t.Fatalf("received %d", n)
	}
}

// Token buckets per destination and per channel: a burst of two, then
// the third send within the second is refused (ErrThrottled, retried
// later) by the bucket it exceeds, and passes a second later.
func TestDeliver_throttleBuckets(t *testing.T) {
	tests := []struct {
		name string
		cfg  throttle.Config
		// sends are the destinations of the sends, each of a new subject;
		// refused are the indices the throttle refuses.
		sends   []string
		refused []int
	}{
		{"per destination", throttle.Config{Destination: throttle.Limit{Rate: 1, Burst: 2}},
			[]string{"a", "a", "a", "b"}, []int{2}},
		{"per channel", throttle.Config{Destination: throttle.Limit{Rate: 1000, Burst: 1000},
			Channels: map[string]throttle.Limit{ChannelWebhook: {Rate: 1, Burst: 2}}},
			[]string{"a", "b", "c", "a"}, []int{2, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			w := newWorld(t, mini(t), tt.cfg)
			subs := map[string]string{}
			for _, d := range []string{"a", "b", "c"} {
				subs[d] = w.subscribe(t, "/"+d, "", subscriber.Preferences{})
			}
			send := func(dest, subject string) error {
				sub := subs[dest]
				return w.d.Deliver(ctx, &stream.Message{ID: "1-1", Partition: w.topic.Partition(sub), Type: TypeRequest, Attempt: 1}, req(sub, subject, "w"))
			}
			var refused []int
			for i, d := range tt.sends {
				err := send(d, "x"+strconv.Itoa(i))
				switch {
				case errors.Is(err, ErrThrottled):
					refused = append(refused, i)
				case err != nil:
					t.Fatalf("send %d to %s: %v", i, d, err)
				}
			}
			if !slices.Equal(refused, tt.refused) {
				t.Fatalf("refused sends %v, want %v", refused, tt.refused)
			}
			w.setNow(w.clock().Add(time.Second))
			if err := send(tt.sends[tt.refused[0]], "x"+strconv.Itoa(tt.refused[0])); err != nil {
				t.Fatalf("a second later: %v", err)
			}
			if n, want := len(w.hook.messages()), len(tt.sends)-len(tt.refused)+1; n != want {
				t.Fatalf("received %d, want %d", n, want)
			}
		})
	}
}
