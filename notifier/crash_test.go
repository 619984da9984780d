package notifier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/dropstream/dropstream/internal/telemetrytest"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/notifier/history"
	"github.com/dropstream/dropstream/stream"
)

// realDispatcher is a dispatcher over a redis-server database of the
// test's own, with its metrics.
func realDispatcher(t *testing.T, ch Channel) (*Dispatcher, *history.Recorder, func() int64) {
	t.Helper()
	rdb := dial(t, testenv.RedisURL(t))
	ledger, err := NewDeliveryLedger(rdb, DeliveryLedgerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	mp, collect := telemetrytest.Metrics(t)
	d, err := NewDispatcher(ledger, map[string]Channel{ch.Name(): ch}, stream.Telemetry{MeterProvider: mp, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	hist, err := history.NewRecorder(rdb, stream.NewPublisher(rdb, stream.Telemetry{}), history.Config{Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	return d, hist, func() int64 {
		return telemetrytest.CounterSum(collect(), MetricResumed, map[string]string{"channel": ch.Name()})
	}
}

// A delivery that stopped mid-send (a crash: its lease left in the ledger)
// is taken back at once by the redelivery of the same message, and counted;
// any other delivery still finds it in flight until the lease ends.
func TestDispatcher_redeliveryTakesBackItsOwnLease(t *testing.T) {
	for _, tc := range []struct {
		name        string
		msgID       string
		redelivered bool
		want        error // nil: sent now
	}{
		{"the same message redelivered", "1-0", true, nil},
		{"the same message on its first delivery", "1-0", false, ErrInFlight},
		{"another message redelivered", "2-0", true, ErrInFlight},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ch := &fakeChannel{name: "fake"}
			d, _, resumed := realDispatcher(t, ch)
			// The crashed copy claimed the send for message 1-0 and died.
			key := d.Ledger().Key("{avail.0}", "avail:w_1:ev-1")
			if res, err := d.Ledger().claim(ctx, key, &DeliveryRecord{MessageID: "1-0"}); err != nil || res != claimed {
				t.Fatalf("claim = %s, %v", res, err)
			}
			del := delivery(tc.msgID)
			del.Redelivered = tc.redelivered
			got, err := d.Deliver(ctx, del)
			if tc.want != nil {
				if !errors.Is(err, tc.want) || ch.sends() != 0 || resumed() != 0 {
					t.Fatalf("Deliver = %s, %v, %d sends, %d resumed; want %v and nothing sent", got, err, ch.sends(), resumed(), tc.want)
				}
				return
			}
			if got != OutcomeSent || err != nil || ch.sends() != 1 || resumed() != 1 {
				t.Fatalf("Deliver = %s, %v, %d sends, %d resumed; want sent once, one resumed", got, err, ch.sends(), resumed())
			}
			if rec, err := d.Ledger().Get(ctx, key); err != nil || rec.State != DeliverySent {
				t.Fatalf("ledger record %+v, %v: want sent", rec, err)
			}
		})
	}
}

// gateChannel sends at once, except to the recipient it holds: that send
// waits until release is closed.
type gateChannel struct {
	fakeChannel
	hold    string
	holding chan struct{}
	release chan struct{}
}

func (g *gateChannel) Send(ctx context.Context, n Notification) error {
	if n.Recipient.ID == g.hold {
		close(g.holding)
		<-g.release
	}
	return g.fakeChannel.Send(ctx, n)
}

// Each send is recorded, in the ledger and in the history together, as
// soon as it is done, not when its batch is: while one send of a batch
// hangs, the others are already recorded sent, with their history.
func TestDispatcher_recordsEachSendAsItCompletes(t *testing.T) {
	ctx := context.Background()
	ch := &gateChannel{fakeChannel: fakeChannel{name: "fake"}, hold: "w_slow", holding: make(chan struct{}), release: make(chan struct{})}
	d, hist, _ := realDispatcher(t, ch)
	dels := make([]Delivery, 4)
	for i := range dels {
		n := testNotification("")
		n.Recipient.ID = fmt.Sprintf("w_%d", i)
		if i == 0 {
			n.Recipient.ID = ch.hold
		}
		dels[i] = Delivery{HashTag: "{avail.0}", Key: "avail:" + n.Recipient.ID + ":ev-1", Channel: "fake", MessageID: "1-0", Attempt: 1,
			Notification: n}
	}
	opts := BatchOptions{Concurrency: len(dels), History: hist, Record: func(i int, outcome string, err error) []history.Record {
		rec, ok := dels[i].HistoryRecord(outcome, err, dels[i].Notification.ObservedAt)
		if !ok {
			return nil
		}
		return []history.Record{rec}
	}}
	done := make(chan []string)
	go func() { outcomes, _ := d.DeliverBatch(ctx, dels, opts); done <- outcomes }()
	<-ch.holding
	testenv.WaitFor(t, waitTimeout, func() bool { return ch.sends() == len(dels)-1 }, "the other sends done")
	for _, del := range dels[1:] {
		key := d.Ledger().Key(del.HashTag, del.Key)
		testenv.WaitFor(t, waitTimeout, func() bool {
			rec, err := d.Ledger().Get(ctx, key)
			return err == nil && rec.State == DeliverySent
		}, "the ledger record of "+del.Notification.Recipient.ID+" sent while the batch runs")
		if h, err := hist.Get(ctx, NotificationID(del.Key)); err != nil || h.Status != history.StatusSent {
			t.Fatalf("history of %s: %+v, %v; want sent, written with its ledger record", del.Notification.Recipient.ID, h, err)
		}
	}
	slow := d.Ledger().Key(dels[0].HashTag, dels[0].Key)
	if rec, err := d.Ledger().Get(ctx, slow); err != nil || rec.State != DeliverySending {
		t.Fatalf("the hanging send's record %+v, %v; want sending", rec, err)
	}
	close(ch.release)
	for i, o := range <-done {
		if o != OutcomeSent {
			t.Errorf("delivery %d: %s, want sent", i, o)
		}
	}
}

// A crash is not a failed attempt: the runtime's redeliveries of one entry
// leave its attempt number alone, and a request that only found its sends
// in flight elsewhere, or whose time ran out before them, is retried on the
// same attempt.
func TestAttempts_countOnlyFailedSends(t *testing.T) {
	inFlight := fmt.Errorf("%w: k", ErrInFlight)
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	late := unsent(ended, fmt.Errorf("notifier: claim delivery k: %w", context.DeadlineExceeded))
	for _, tc := range []struct {
		name    string
		meta    string // MetaAttempt, "" for none
		runtime int    // stream.Message.Attempt
		err     error
		attempt int
		untried bool
	}{
		{"first delivery", "", 1, errors.New("boom"), 1, false},
		{"redelivered after a crash", "", 3, errors.New("boom"), 1, false},
		{"a retry redelivered after a crash", "4", 2, errors.New("boom"), 4, false},
		{"only in flight elsewhere", "2", 1, Settle([]error{inFlight, inFlight}), 2, true},
		{"in flight and failed", "2", 1, Settle([]error{inFlight, errors.New("boom")}), 2, false},
		{"time ran out before the sends", "3", 1, Settle([]error{late, inFlight}), 3, true},
		{"time ran out before one send, another failed", "3", 1, Settle([]error{late, errors.New("boom")}), 3, false},
		{"a send that timed out", "3", 1, Settle([]error{&DeliveryError{Channel: ChannelWebhook, Retryable: true, Err: context.DeadlineExceeded}}), 3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &stream.Message{ID: "1-0", Attempt: tc.runtime, Metadata: map[string]string{}}
			if tc.meta != "" {
				m.Metadata[MetaAttempt] = tc.meta
			}
			if got := attemptOf(m); got != tc.attempt {
				t.Errorf("attempt %d, want %d", got, tc.attempt)
			}
			if got := untried(tc.err); got != tc.untried {
				t.Errorf("untried: %v, want %v", got, tc.untried)
			}
		})
	}
}

// The sends resumed after a restart are logged once per episode, with
// their count, not once per send or per batch: the redeliveries of two
// partitions' batches make one line; a later restart makes another.
func TestDispatcher_logsEachResumeEpisodeOnce(t *testing.T) {
	ctx := context.Background()
	logs := &telemetrytest.Logs{}
	ledger, err := NewDeliveryLedger(dial(t, testenv.RedisURL(t)), DeliveryLedgerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDispatcher(ledger, map[string]Channel{"fake": &fakeChannel{name: "fake"}}, stream.Telemetry{Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	d.resumed.gap = time.Second
	// crashed returns the redeliveries of sends a stopped copy claimed for
	// message 1-0 of partition tag.
	crashed := func(tag string, recipients ...string) []Delivery {
		var dels []Delivery
		for _, r := range recipients {
			del := delivery("1-0")
			del.HashTag, del.Key, del.Redelivered = tag, "avail:"+r+":ev-1", true
			if res, err := ledger.claim(ctx, ledger.Key(del.HashTag, del.Key), &DeliveryRecord{MessageID: "1-0"}); err != nil || res != claimed {
				t.Fatalf("claim = %s, %v", res, err)
			}
			dels = append(dels, del)
		}
		return dels
	}
	resend := func(dels []Delivery) {
		for i, o := range func() []string { o, _ := d.DeliverBatch(ctx, dels, BatchOptions{Concurrency: 2}); return o }() {
			if o != OutcomeSent {
				t.Fatalf("resumed delivery %d: %s, want sent", i, o)
			}
		}
	}
	first, second := crashed("{avail.0}", "w_1", "w_2"), crashed("{avail.1}", "w_3")
	resend(first)
	resend(second)
	testenv.WaitFor(t, waitTimeout, func() bool { return logs.Count(MsgResumed, nil) > 0 }, "the episode logged")
	if n := logs.Count(MsgResumed, map[string]string{"deliveries": "3", "flows": "avail"}); n != 1 {
		t.Fatalf("%d lines of three resumed deliveries; log %+v", n, logs.Records())
	}
	resend(crashed("{avail.0}", "w_4"))
	testenv.WaitFor(t, waitTimeout, func() bool { return logs.Count(MsgResumed, nil) > 1 }, "the second episode logged")
	if n := logs.Count(MsgResumed, map[string]string{"deliveries": "1"}); n != 1 || logs.Count(MsgResumed, nil) != 2 {
		t.Fatalf("want one line per episode, the second of one delivery; log %+v", logs.Records())
	}
}
