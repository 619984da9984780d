package watch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/internal/telemetrytest"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/history"
	"github.com/dropstream/dropstream/stream"
)

func TestStage_deliversOncePerSession(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			p := startPipeline(t, b.Client(t), testRunner())
			e := slot("v1", "2025-07-04", "19:00", 2)
			other := slot("v2", "2025-07-04", "19:00", 2)
			venue := p.webhookWatcher("venue", func(w *Watcher) { w.Provider, w.Venue = "resy", "v1" })
			exact := p.webhookWatcher("slot", func(w *Watcher) { w.Slot = e.Key; w.PartySizes = []int{2} })
			p.webhookWatcher("party4", func(w *Watcher) { w.Provider, w.Venue, w.PartySizes = "resy", "v1", []int{4} })
			p.webhookWatcher("tock", func(w *Watcher) { w.Provider = "tock" })
			logW, err := p.store.Create(context.Background(), Watcher{Name: "log", Provider: "resy", Channel: notifier.ChannelLog})
			if err != nil {
				t.Fatal(err)
			}

			// Window 1: raw open in run 1, confirmed in run 2. Around it,
			// transitions that notify nobody: a flapping raw open of another
			// entity, a baseline stable open, a stable close.
			p.publish(rawFlip(e, avail.KindOpen, 1), rawFlip(other, avail.KindOpen, 1),
				rawFlip(other, avail.KindClose, 2), stableFlip(e, avail.KindOpen, 2, true),
				stableFlip(other, avail.KindOpen, 2, false))
			p.settled(5)
			testenv.WaitFor(t, waitTimeout, func() bool { return p.notifications(notifier.OutcomeSent) == 3 }, "three deliveries")

			// The same stable open published again: no new delivery.
			p.publish(stableFlip(e, avail.KindOpen, 2, true), rawFlip(e, avail.KindOpen, 1))
			p.settled(7)
			testenv.WaitFor(t, waitTimeout, func() bool { return p.notifications(notifier.OutcomeDuplicate) == 3 }, "three duplicates")

			// Window 2: closed (raw, stable) and opened again (raw, stable).
			p.publish(rawFlip(e, avail.KindClose, 3), stableFlip(e, avail.KindClose, 4, true),
				rawFlip(e, avail.KindOpen, 5), stableFlip(e, avail.KindOpen, 6, true))
			p.settled(11)
			testenv.WaitFor(t, waitTimeout, func() bool { return p.notifications(notifier.OutcomeSent) == 6 }, "six deliveries")

			for _, name := range []string{"venue", "slot"} {
				evs := p.recv.events(name)
				if len(evs) != 2 {
					t.Fatalf("%s got %d events, want 2", name, len(evs))
				}
				for i, open := range []struct{ raw, stable int }{{1, 2}, {5, 6}} {
					ev := evs[i]
					want := OpenEvent{Event: EventAvailabilityOpen, EventID: avail.EventID(runID(open.stable), e.Key, avail.KindOpen, true),
						SessionID: avail.SessionID(e.Key, runID(open.raw)), RunAt: t0.Add(time.Duration(open.stable) * time.Minute)}
					if ev.Event != want.Event || ev.EventID != want.EventID || ev.SessionID != want.SessionID ||
						!ev.RunAt.Equal(want.RunAt) || ev.Entity.Key != e.Key || ev.Entity.VenueName != e.VenueName || ev.TraceID == "" {
						t.Errorf("%s event %d = %+v, want %+v", name, i, ev, want)
					}
				}
			}
			if ev := p.recv.events("venue")[0]; ev.WatcherID != venue.ID {
				t.Errorf("watcher id %q, want %q", ev.WatcherID, venue.ID)
			}
			if ev := p.recv.events("slot")[0]; ev.WatcherID != exact.ID {
				t.Errorf("watcher id %q, want %q", ev.WatcherID, exact.ID)
			}
			for _, name := range []string{"party4", "tock"} {
				if hits, _ := p.recv.counts(name); hits != 0 {
					t.Errorf("%s was called %d times, want 0", name, hits)
				}
			}
			if n := p.logged.sends(logW.ID); n != 2 {
				t.Errorf("log watcher notified %d times, want 2", n)
			}
			rm := p.collect()
			if n := telemetrytest.HistogramCount(rm, notifier.MetricEndToEndLatency, map[string]string{"flow": "avail"}); n != 6 {
				t.Errorf("%s has %d observations, want 6", notifier.MetricEndToEndLatency, n)
			}
			if n := telemetrytest.HistogramCount(rm, notifier.MetricDeliveryDuration, map[string]string{"channel": notifier.ChannelWebhook, "outcome": notifier.OutcomeSent}); n != 4 {
				t.Errorf("%s has %d webhook observations, want 4", notifier.MetricDeliveryDuration, n)
			}
			if n := telemetrytest.CounterSum(rm, notifier.MetricNotifications, map[string]string{"channel": notifier.ChannelLog, "outcome": notifier.OutcomeSent}); n != 2 {
				t.Errorf("log notifications sent = %d, want 2", n)
			}
			if dls := p.deadLetters(); len(dls) != 0 {
				t.Errorf("dead letters: %+v", dls)
			}
		})
	}
}

// An availability delivery is recorded in the history with what
// GET /v1/notifications/{id}/why follows: the watcher as subscriber, its
// channel, the entity as subject, the stable open's event id and run, the
// run's trace id and the latency from the run's time.
func TestStage_recordsHistoryForWhy(t *testing.T) {
	ctx := context.Background()
	rdb := mini(t)
	hist, err := history.NewRecorder(rdb, nil, history.Config{})
	if err != nil {
		t.Fatal(err)
	}
	p := startPipelineWith(t, rdb, testRunner(), Config{History: hist})
	e := slot("v1", "2025-07-04", "19:00", 2)
	w := p.webhookWatcher("slot", func(w *Watcher) { w.Slot = e.Key })
	p.publish(rawFlip(e, avail.KindOpen, 1), stableFlip(e, avail.KindOpen, 2, true))
	p.settled(2)
	var recs []history.Record
	testenv.WaitFor(t, waitTimeout, func() bool {
		recs, err = hist.Recent(ctx, w.ID, 10)
		return err == nil && len(recs) == 1
	}, "one history record of the watcher")
	eventID := avail.EventID(runID(2), e.Key, avail.KindOpen, true)
	rec := recs[0]
	if rec.ID != notifier.NotificationID(avail.Flow+":"+w.ID+":"+eventID) || rec.Flow != avail.Flow || rec.Channel != notifier.ChannelWebhook ||
		rec.Subject != e.Key || rec.Status != history.StatusSent || rec.Attempts != 1 || rec.EventID != eventID ||
		rec.RunID != runID(2) || rec.TraceID != fmt.Sprintf("%032x", 3) {
		t.Fatalf("record %+v: want the sent notification of %s with its transition, run and trace", rec, eventID)
	}
	runAt := t0.Add(2 * time.Minute)
	if !rec.ObservedAt.Equal(runAt) || rec.LatencyMs != rec.At.Sub(runAt).Milliseconds() {
		t.Fatalf("observed at %s, latency %d ms: want the run's time %s and the time from it to the send", rec.ObservedAt, rec.LatencyMs, runAt)
	}
	if got, err := hist.Get(ctx, rec.ID); err != nil || got.RunID != rec.RunID {
		t.Fatalf("Get(%s) = %+v, %v", rec.ID, got, err)
	}
}

// A watcher's delivery is recorded, its history with its ledger record, as
// soon as its send is done, not when the message's other sends are: while
// one watcher's receiver hangs, another's notification is in the history.
func TestStage_recordsEachWatcherSendAsItCompletes(t *testing.T) {
	ctx := context.Background()
	rdb := mini(t)
	hist, err := history.NewRecorder(rdb, nil, history.Config{})
	if err != nil {
		t.Fatal(err)
	}
	runner := testRunner()
	runner.HandlerTimeout, runner.ClaimIdle = 30*time.Second, 2*time.Minute
	p := startPipelineTimeout(t, rdb, runner, Config{History: hist}, 30*time.Second)
	e := slot("v1", "2025-07-04", "19:00", 2)
	fast := p.webhookWatcher("fast", func(w *Watcher) { w.Slot = e.Key })
	slow := p.webhookWatcher("slow", func(w *Watcher) { w.Slot = e.Key })
	release := p.recv.hold("slow")
	p.publish(rawFlip(e, avail.KindOpen, 1), stableFlip(e, avail.KindOpen, 2, true))
	sent := func(id string) bool {
		recs, err := hist.Recent(ctx, id, 10)
		return err == nil && len(recs) == 1 && recs[0].Status == history.StatusSent
	}
	// The two sends run concurrently: nothing orders the slow one's arrival
	// before the fast one's history, so the test waits for it.
	testenv.WaitFor(t, waitTimeout, func() bool { hits, _ := p.recv.counts("slow"); return hits == 1 }, "the slow watcher's request held by its receiver")
	testenv.WaitFor(t, waitTimeout, func() bool { return sent(fast.ID) }, "the fast watcher's history while the slow one's send hangs")
	if hits, accepted := p.recv.counts("slow"); hits != 1 || accepted != 0 || sent(slow.ID) {
		t.Fatalf("slow watcher: %d requests, %d answered, history sent %v; want its one send still hanging", hits, accepted, sent(slow.ID))
	}
	release()
	p.settled(2)
	testenv.WaitFor(t, waitTimeout, func() bool { return sent(slow.ID) }, "the slow watcher's history once answered")
}

// failHistory fails every pipeline that writes a subscriber's history, as
// a process that dies while writing it would.
type failHistory struct{}

func (failHistory) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (failHistory) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (failHistory) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if c.Name() == "lpush" && strings.Contains(fmt.Sprint(c.Args()[1]), ":history:") {
				err := errors.New("the process died")
				for _, c := range cmds {
					c.SetErr(err)
				}
				return err
			}
		}
		return next(ctx, cmds)
	}
}

// A watcher delivery the ledger holds as sent has its history: the two are
// written in one step, so when the history cannot be written, the ledger
// does not hold the send as sent either (its lease lapses, and a
// redelivery would send it again).
func TestStage_noDeliveryMarkedSentWithoutItsHistory(t *testing.T) {
	ctx := context.Background()
	rdb := mini(t)
	hist, err := history.NewRecorder(rdb, nil, history.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rdb.AddHook(failHistory{})
	p := startPipelineWith(t, rdb, testRunner(), Config{History: hist})
	e := slot("v1", "2025-07-04", "19:00", 2)
	w := p.webhookWatcher("slot", func(w *Watcher) { w.Slot = e.Key })
	p.publish(rawFlip(e, avail.KindOpen, 1), stableFlip(e, avail.KindOpen, 2, true))
	p.settled(2)
	if _, accepted := p.recv.counts("slot"); accepted != 1 {
		t.Fatalf("the watcher got %d notifications, want 1", accepted)
	}
	business := avail.Flow + ":" + w.ID + ":" + avail.EventID(runID(2), e.Key, avail.KindOpen, true)
	keys, err := rdb.Keys(ctx, "*"+business).Result()
	if err != nil {
		t.Fatal(err)
	}
	var state notifier.DeliveryState // none: the lease may have lapsed already
	for _, k := range keys {
		raw, err := rdb.Get(ctx, k).Bytes()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
		var rec notifier.DeliveryRecord
		if err == nil && json.Unmarshal(raw, &rec) == nil {
			state = rec.State
		}
	}
	_, herr := hist.Get(ctx, notifier.NotificationID(business))
	if state == notifier.DeliverySent || !errors.Is(herr, history.ErrNotFound) {
		t.Fatalf("ledger state %s, history %v: want no history and the send not marked sent", state, herr)
	}
}

func TestStage_retriesUntilDelivered(t *testing.T) {
	noInProcessRetry := testRunner()
	noInProcessRetry.Retry = stream.RetryConfig{Disabled: true}
	noInProcessRetry.ClaimIdle = 1500 * time.Millisecond
	for _, b := range testenv.Backends() {
		for _, rc := range []struct {
			name   string
			runner stream.RunnerConfig
		}{{"in-process retries", testRunner()}, {"redelivery", noInProcessRetry}} {
			t.Run(b.Name+"/"+rc.name, func(t *testing.T) {
				p := startPipeline(t, b.Client(t), rc.runner)
				p.recv.setStatus(func(_ string, hit int) int {
					if hit <= 2 {
						return http.StatusInternalServerError
					}
					return http.StatusOK
				})
				p.webhookWatcher("flaky", func(w *Watcher) { w.Provider = "resy" })
				e := slot("v1", "2025-07-04", "19:00", 2)
				p.publish(rawFlip(e, avail.KindOpen, 1), stableFlip(e, avail.KindOpen, 2, true))
				p.settled(2)
				hits, accepted := p.recv.counts("flaky")
				if hits != 3 || accepted != 1 {
					t.Errorf("receiver: %d requests, %d accepted; want 3 and 1", hits, accepted)
				}
				if n := p.notifications(notifier.OutcomeFailed); n != 2 {
					t.Errorf("failed notifications = %d, want 2", n)
				}
				if dls := p.deadLetters(); len(dls) != 0 {
					t.Errorf("dead-lettered: %+v", dls)
				}
			})
		}
	}
}

func TestStage_refusedIsDeadLettered(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			p := startPipeline(t, b.Client(t), testRunner())
			p.recv.setStatus(func(path string, _ int) int {
				if path == "refusing" {
					return http.StatusBadRequest
				}
				return http.StatusOK
			})
			p.webhookWatcher("refusing", func(w *Watcher) { w.Provider = "resy" })
			p.webhookWatcher("fine", func(w *Watcher) { w.Provider = "resy" })
			e := slot("v1", "2025-07-04", "19:00", 2)
			p.publish(rawFlip(e, avail.KindOpen, 1), stableFlip(e, avail.KindOpen, 2, true))
			p.settled(2)
			dls := p.deadLetters()
			// The reason keeps the status and its class, never the
			// receiver's answer.
			if len(dls) != 1 || !strings.Contains(dls[0].Reason, "status 400") || !strings.Contains(dls[0].Reason, "http_4xx") ||
				strings.Contains(dls[0].Reason, "answer 400") || dls[0].Attempts != 1 || dls[0].Stage != StageNotifier {
				t.Fatalf("dead letters %+v: want one after 1 attempt, with the 400 and its class, not its answer, as reason", dls)
			}
			if hits, _ := p.recv.counts("refusing"); hits != 1 {
				t.Errorf("refusing receiver called %d times, want 1: no retry", hits)
			}
			if _, accepted := p.recv.counts("fine"); accepted != 1 {
				t.Errorf("fine receiver got %d, want 1", accepted)
			}

			// Fixed, then replayed: the refusing one gets it, the fine one
			// not again.
			p.recv.setStatus(func(string, int) int { return http.StatusOK })
			if n, err := stream.NewDeadLetters(p.rdb).Replay(context.Background(), p.topics.Transitions); err != nil || n != 1 {
				t.Fatalf("Replay = %d, %v", n, err)
			}
			p.settled(3)
			for name, want := range map[string]int{"refusing": 1, "fine": 1} {
				if _, accepted := p.recv.counts(name); accepted != want {
					t.Errorf("%s accepted %d after the replay, want %d", name, accepted, want)
				}
			}
			if n := p.notifications(notifier.OutcomeDuplicate); n != 1 {
				t.Errorf("duplicates = %d, want 1 (the fine watcher on replay)", n)
			}
			if dls := p.deadLetters(); len(dls) != 0 {
				t.Errorf("dead letters after the replay: %+v", dls)
			}
		})
	}
}

func TestStage_oneWatcherFailing(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			runner := testRunner()
			p := startPipeline(t, b.Client(t), runner)
			p.recv.setStatus(func(path string, _ int) int {
				if path == "down" {
					return http.StatusServiceUnavailable
				}
				return http.StatusOK
			})
			p.webhookWatcher("down", func(w *Watcher) { w.Provider, w.Venue = "resy", "v1" })
			p.webhookWatcher("up", func(w *Watcher) { w.Provider, w.Venue = "resy", "v1" })
			e := slot("v1", "2025-07-04", "19:00", 2)
			p.publish(rawFlip(e, avail.KindOpen, 1), stableFlip(e, avail.KindOpen, 2, true))
			p.settled(2)
			dls := p.deadLetters()
			if len(dls) != 1 || dls[0].Attempts != runner.MaxDeliveries || !strings.Contains(dls[0].Reason, "status 503") {
				t.Fatalf("dead letters %+v: want one after %d deliveries with the 503 as reason", dls, runner.MaxDeliveries)
			}
			if hits, accepted := p.recv.counts("up"); hits != 1 || accepted != 1 {
				t.Errorf("up receiver: %d requests, %d accepted; want exactly 1", hits, accepted)
			}
			tries := runner.MaxDeliveries * (runner.Retry.MaxRetries + 1)
			if hits, _ := p.recv.counts("down"); hits != tries {
				t.Errorf("down receiver called %d times, want %d", hits, tries)
			}
		})
	}
}

func TestStage_badMessages(t *testing.T) {
	p := startPipeline(t, mini(t), testRunner())
	p.webhookWatcher("any", func(w *Watcher) { w.Provider = "resy" })
	good, _ := json.Marshal(stableFlip(slot("v1", "2025-07-04", "19:00", 2), avail.KindOpen, 2, true))
	noRun := stableFlip(slot("v1", "2025-07-04", "19:00", 2), avail.KindOpen, 2, true)
	noRun.RunID = ""
	noRunBody, _ := json.Marshal(noRun)
	msgs := []*stream.Message{
		stream.NewMessage("s", "avail.run", good),
		stream.NewMessage("s", avail.TypeTransition, []byte("{not json")),
		stream.NewMessage("s", avail.TypeTransition, noRunBody),
		stream.NewMessage("s", avail.TypeTransition, []byte(`{"entity":{"key":"`+strings.Repeat("k", 70<<10)+`"}}`)),
	}
	if err := p.pub.Publish(context.Background(), p.topics.Transitions, msgs...); err != nil {
		t.Fatal(err)
	}
	p.settled(4)
	dls := p.deadLetters()
	if len(dls) != 4 {
		t.Fatalf("%d dead letters, want 4", len(dls))
	}
	for _, want := range []string{"type", "decode", "run id", "exceeds"} {
		found := false
		for _, dl := range dls {
			found = found || strings.Contains(dl.Reason, want)
		}
		if !found {
			t.Errorf("no dead letter mentions %q", want)
		}
	}
	if hits, _ := p.recv.counts("any"); hits != 0 {
		t.Errorf("receiver called %d times", hits)
	}
}

func TestStage_sessionIDs(t *testing.T) {
	p := startPipeline(t, mini(t), testRunner())
	p.webhookWatcher("v1", func(w *Watcher) { w.Provider, w.Venue = "resy", "v1" })
	p.webhookWatcher("v2", func(w *Watcher) { w.Provider, w.Venue = "resy", "v2" })
	// Stabilization 1: one event, raw and stable at once.
	one := slot("v1", "2025-07-04", "19:00", 2)
	both := stableFlip(one, avail.KindOpen, 7, true)
	both.Raw = true
	// A stable open whose raw open the notifier never saw.
	unseen := slot("v2", "2025-07-04", "19:00", 2)
	p.publish(both, stableFlip(unseen, avail.KindOpen, 3, true))
	p.settled(2)
	if evs := p.recv.events("v1"); len(evs) != 1 || evs[0].SessionID != avail.SessionID(one.Key, runID(7)) {
		t.Errorf("stabilization-1 events %+v: want one with the session of run 7", evs)
	}
	if evs := p.recv.events("v2"); len(evs) != 1 || evs[0].SessionID != "" {
		t.Errorf("events %+v: want one without a session id", evs)
	}
	if n := telemetrytest.CounterSum(p.collect(), MetricUnresolvedSessions, nil); n != 1 {
		t.Errorf("%s = %d, want 1", MetricUnresolvedSessions, n)
	}
}
