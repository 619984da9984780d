package notifier

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/notifier/digest"
	"github.com/dropstream/dropstream/notifier/subscriber"
	"github.com/dropstream/dropstream/notifier/throttle"
	"github.com/dropstream/dropstream/stream"
)

// Digests end to end, for each window kind: requests published to the
// stream and handled by the running deliver stage are sent at once (each)
// or batched into their window (every n by arrival; a time window by the
// message's publication time, in the subscriber's zone); a critical one
// bypasses the digest. When a window is due the flusher publishes one
// digest request, which the stage delivers once, also when that window is
// published again (a flusher that crashed before forgetting it).
func TestDeliver_digestWindowsThroughTheStage(t *testing.T) {
	tests := []struct {
		name string
		tz   string
		p    digest.Policy
	}{
		{"each", "", digest.Policy{Mode: digest.ModeEach}},
		{"every-2", "", digest.Policy{Mode: digest.ModeEvery, Every: 2}},
		{"hourly", "America/New_York", digest.Policy{Mode: digest.ModeHourly}},
		{"daily", "Europe/Paris", digest.Policy{Mode: digest.ModeDaily, At: "08:00"}},
		{"weekly", "Asia/Tokyo", digest.Policy{Mode: digest.ModeWeekly, Weekday: "monday", At: "08:00"}},
	}
	subjects := []string{"comic:1", "comic:2", "comic:3", "comic:4"}
	for _, b := range backends() {
		for _, tt := range tests {
			t.Run(b.name+"/"+tt.name, func(t *testing.T) {
				ctx := context.Background()
				w := newWorld(t, b.client(t), throttle.Config{Disabled: true})
				w.setNow(time.Now())
				sub := w.subscribe(t, "/"+tt.name, tt.tz, subscriber.Preferences{Digest: tt.p})
				loc, err := time.LoadLocation(tt.tz)
				if err != nil {
					t.Fatal(err)
				}
				w.run(t)
				alarm := req(sub, "comic:alarm", "w")
				alarm.Critical = true
				w.publish(t, alarm)
				// Which time window each request lands in follows from its
				// stream id (a run at the end of an hour may span two).
				want := map[string][]string{}
				var last time.Time
				for _, s := range subjects {
					body, err := json.Marshal(req(sub, s, "w"))
					if err != nil {
						t.Fatal(err)
					}
					m := stream.NewMessage(sub, TypeRequest, body)
					if err := w.pub.Publish(ctx, w.topic, m); err != nil {
						t.Fatal(err)
					}
					if win, err := tt.p.TimeWindow(m.PublishedAt(), loc); err == nil {
						want[win.ID] = append(want[win.ID], s)
						if win.End.After(last) {
							last = win.End
						}
					}
				}
				w.waitSettled(t, 5)
				testenv.WaitFor(t, waitTimeout, func() bool { return len(w.statuses(t, sub)) == 5 }, "5 history records")
				direct := func() (out []string) {
					for _, m := range w.hook.messages() {
						if !m.Digest {
							out = append(out, m.Subject)
						}
					}
					slices.Sort(out)
					return out
				}
				switch tt.p.Mode {
				case digest.ModeEach:
					if got := direct(); !slices.Equal(got, append(slices.Clone(subjects), "comic:alarm")) {
						t.Fatalf("sent %v, want every request at once", got)
					}
					if n, err := w.d.FlushDigests(ctx); err != nil || n != 0 {
						t.Fatalf("flush: %d, %v; want no digest", n, err)
					}
					return
				}
				st := w.statuses(t, sub)
				slices.Sort(st)
				if !slices.Equal(st, []string{"batched", "batched", "batched", "batched", "sent"}) || !slices.Equal(direct(), []string{"comic:alarm"}) {
					t.Fatalf("history %v, sent %v; want the critical one sent at once, the rest batched", st, direct())
				}
				switch tt.p.Mode {
				case digest.ModeEvery:
					// Two full windows of two, in arrival order: due at once.
					want = map[string][]string{"every:0": nil, "every:1": nil}
					if n, err := w.d.FlushDigests(ctx); err != nil || n != 2 {
						t.Fatalf("flush: %d, %v; want 2 digests", n, err)
					}
				default:
					w.setNow(last.Add(-time.Second))
					if n, err := w.d.FlushDigests(ctx); err != nil || n != len(want)-1 {
						t.Fatalf("flush before the last window's end: %d, %v; want %d", n, err, len(want)-1)
					}
					w.setNow(last)
					if n, err := w.d.FlushDigests(ctx); err != nil || n != 1 {
						t.Fatalf("flush at the window's end: %d, %v; want 1", n, err)
					}
				}
				digests := func() (out []Message) {
					for _, m := range w.hook.messages() {
						if m.Digest {
							out = append(out, m)
						}
					}
					return out
				}
				testenv.WaitFor(t, waitTimeout, func() bool { return len(digests()) == len(want) }, "%d digests received", len(want))
				var again []Request
				for _, m := range digests() {
					again = append(again, Request{Flow: "digest", Event: "digest", Subject: "digest", SubscriberID: sub,
						DestinationID: m.DestinationID, Window: m.Window, Digest: true, Critical: true, Payload: m.Payload})
				}
				settled := w.settled.Load()
				w.publish(t, again...)
				w.waitSettled(t, settled+int64(len(again)))
				got := map[string][]string{}
				var items []string
				for _, m := range digests() {
					var pl DigestPayload
					if err := json.Unmarshal(m.Payload, &pl); err != nil {
						t.Fatalf("digest %+v: %v", m, err)
					}
					for _, it := range pl.Items {
						got[pl.Window] = append(got[pl.Window], it.Subject)
						items = append(items, it.Subject)
					}
				}
				slices.Sort(items)
				if len(digests()) != len(want) || len(got) != len(want) || !slices.Equal(items, subjects) {
					t.Fatalf("digests %v, want %d windows holding each of %v once", got, len(want), subjects)
				}
				for id, items := range got {
					slices.Sort(items)
					if wantItems, ok := want[id]; !ok || (wantItems != nil && !slices.Equal(items, wantItems)) || len(items) == 0 {
						t.Fatalf("digest %s holds %v, want %v", id, items, want[id])
					}
					if tt.p.Mode == digest.ModeEvery && len(items) != 2 {
						t.Fatalf("digest %s holds %v, want 2 items", id, items)
					}
				}
				if len(w.hook.bad) > 0 {
					t.Fatalf("bad deliveries: %v", w.hook.bad)
				}
			})
		}
	}
}

// A request naming an inline destination (no subscriber: a confirmation
// request, a removal notice) is delivered end to end, signed with that
// destination's secret, once per window.
func TestDeliver_inlineDestinationThroughTheStage(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			w := newWorld(t, b.client(t), throttle.Config{Disabled: true})
			const secret = "whsec_inline"
			w.hook.mu.Lock()
			w.hook.secrets["/inline"] = secret
			w.hook.mu.Unlock()
			dest := subscriber.Destination{Kind: subscriber.KindWebhook, Address: w.hook.srv.URL + "/inline", Secret: secret}
			r := Request{Flow: "notifier", Event: "subscription.confirm", Subject: "subscription", Destination: &dest,
				Window: "confirm:1", Critical: true, Title: "Confirm", Text: "Please confirm"}
			w.run(t)
			w.publish(t, r, r)
			w.waitSettled(t, 2)
			testenv.WaitFor(t, waitTimeout, func() bool { return len(w.hook.messages()) == 1 }, "the inline request is received")
			w.publish(t, r)
			w.waitSettled(t, 3)
			got := w.hook.messages()
			if len(got) != 1 || len(w.hook.bad) > 0 {
				t.Fatalf("received %d (bad: %v), want 1 signed with the destination's secret", len(got), w.hook.bad)
			}
			m := got[0]
			if m.Event != "subscription.confirm" || m.Text != "Please confirm" || !strings.HasPrefix(m.SubscriberID, "x") || m.SubscriberID != m.DestinationID {
				t.Fatalf("received %+v, want the request to the inline destination", m)
			}
			recs, err := w.hist.Recent(ctx, m.SubscriberID, 10)
			if err != nil || len(recs) != 1 || recs[0].Status != "sent" || recs[0].ID != m.ID {
				t.Fatalf("history %+v, %v: want one sent record", recs, err)
			}
		})
	}
}

// roundTrips counts the commands and pipelines a client sends.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() != "hello" { // not a new connection's handshake
			r.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		// A new connection's handshake (HELLO, SELECT, CLIENT SETINFO) is no
		// round trip of the batch's own.
		if name := cmds[0].Name(); name != "client" && name != "hello" && name != "select" {
			r.n.Add(1)
		}
		return next(ctx, cmds)
	}
}

// A batch costs a constant number of Redis round trips (subscribers,
// ledger claims, throttle takes each in one pipeline) plus at most one per
// send: each send's ledger record and history are written in one
// transaction as soon as it is done, shared by the sends done together.
func TestDeliver_batchCostsConstantRoundTrips(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			rdb := b.client(t)
			w := newWorld(t, rdb, throttle.Config{Destination: throttle.Limit{Rate: 1000, Burst: 1000}})
			subs := make([]string, 40)
			for i := range subs {
				subs[i] = w.subscribe(t, "/"+strconv.Itoa(i), "", subscriber.Preferences{})
			}
			batch := func(n int, window string) []*stream.Message {
				msgs := make([]*stream.Message, n)
				for i := range msgs {
					body, err := json.Marshal(Request{Flow: "comic", Event: "comic.match", Subject: "comic:" + strconv.Itoa(i), SubscriberID: subs[i],
						Window: window, Critical: true})
					if err != nil {
						t.Fatal(err)
					}
					msgs[i] = &stream.Message{ID: "1-" + strconv.Itoa(i), Partition: 0, Type: TypeRequest, Payload: body, Attempt: 1}
				}
				return msgs
			}
			var rt roundTrips
			rdb.AddHook(&rt)
			count := func(msgs []*stream.Message) int64 {
				t.Helper()
				before := rt.n.Load()
				for i, err := range w.d.handleBatch(ctx, msgs).(*stream.BatchError).Errs {
					if err != nil {
						t.Fatalf("message %d: %v", i, err)
					}
				}
				return rt.n.Load() - before
			}
			count(batch(1, "warm-up")) // loads the scripts
			one, forty := count(batch(1, "w")), count(batch(40, "w2"))
			if forty-one > 39 || forty < one || len(w.hook.messages()) != 1+1+40 {
				t.Fatalf("a batch of 1 took %d round trips, of 40 %d, with %d sent; want at most 39 more and 42 sent", one, forty, len(w.hook.messages()))
			}
		})
	}
}

// The sends in flight stay within MaxInFlight across the batches of every
// partition, and the stage uses all of it: with a receiver that takes a
// while to answer, at most (and at some point exactly) two requests are
// open at once.
func TestDeliver_maxInFlightAcrossPartitions(t *testing.T) {
	w := newWorld(t, mini(t), throttle.Config{Disabled: true})
	var open, peak atomic.Int64
	var received atomic.Int64
	slow := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		n := open.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(5 * time.Millisecond) // a receiver that takes a while, so sends overlap
		open.Add(-1)
		received.Add(1)
	}))
	t.Cleanup(slow.Close)
	d, err := NewDeliverer(w.rdb, w.topic, DeliverDeps{Subscribers: w.subs, History: w.hist, Publisher: w.pub, Channels: w.d.dispatch.channels},
		DeliverConfig{Runner: fastRunner, Ledger: DeliveryLedgerConfig{Lease: time.Second}, MaxInFlight: 2, Now: w.clock}, w.tel)
	if err != nil {
		t.Fatal(err)
	}
	w.d = d
	ctx := context.Background()
	var reqs []Request
	for i := range 8 {
		c, err := w.subs.Create(ctx, subscriber.Subscriber{Name: "s" + strconv.Itoa(i),
			Destinations: []subscriber.Destination{{Kind: subscriber.KindWebhook, Address: slow.URL + "/" + strconv.Itoa(i)}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := w.subs.Confirm(ctx, c.ConfirmTokens[c.Subscriber.Destinations[0].ID]); err != nil {
			t.Fatal(err)
		}
		for j := range 5 {
			reqs = append(reqs, req(c.Subscriber.ID, "comic:"+strconv.Itoa(j), "w"))
		}
	}
	w.publish(t, reqs...)
	w.run(t)
	testenv.WaitFor(t, waitTimeout, func() bool { return received.Load() == int64(len(reqs)) }, "%d requests received", len(reqs))
	if p := peak.Load(); p != 2 {
		t.Fatalf("%d sends in flight at the peak, want 2", p)
	}
}
