package notifier

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/dropstream/dropstream/internal/telemetrytest"
	"github.com/dropstream/dropstream/stream"
)

// fakeChannel answers each send with the next error of its script (nil
// once the script is used up) and counts the sends.
type fakeChannel struct {
	name string
	mu   sync.Mutex
	errs []error
	sent []Notification
}

func (f *fakeChannel) Name() string { return f.name }

func (f *fakeChannel) Send(_ context.Context, n Notification) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent = append(f.sent, n)
	if len(f.errs) == 0 {
		return nil
	}
	err := f.errs[0]
	f.errs = f.errs[1:]
	return err
}

func (f *fakeChannel) sends() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.sent)
}

func newDispatcher(t *testing.T, ch Channel, cfg DeliveryLedgerConfig) (*Dispatcher, func() map[string]int64) {
	t.Helper()
	ledger, err := NewDeliveryLedger(mini(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	mp, collect := telemetrytest.Metrics(t)
	d, err := NewDispatcher(ledger, map[string]Channel{ch.Name(): ch}, stream.Telemetry{MeterProvider: mp, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return d, func() map[string]int64 {
		rm := collect()
		out := map[string]int64{}
		for _, o := range []string{OutcomeSent, OutcomeDuplicate, OutcomeFailed} {
			out[o] = telemetrytest.CounterSum(rm, MetricNotifications, map[string]string{"outcome": o, "flow": "avail", "channel": ch.Name()})
		}
		out["e2e"] = int64(telemetrytest.HistogramCount(rm, MetricEndToEndLatency, map[string]string{"flow": "avail"}))
		out["duration"] = int64(telemetrytest.HistogramCount(rm, MetricDeliveryDuration, map[string]string{"flow": "avail"}))
		return out
	}
}

func delivery(msgID string) Delivery {
	return Delivery{HashTag: "{avail.0}", Key: "avail:w_1:ev-1", Channel: "fake", MessageID: msgID, Attempt: 1,
		Notification: testNotification("")}
}

func TestDispatcher_deliverOnce(t *testing.T) {
	ctx := context.Background()
	ch := &fakeChannel{name: "fake"}
	d, counts := newDispatcher(t, ch, DeliveryLedgerConfig{})
	for i, want := range []string{OutcomeSent, OutcomeDuplicate, OutcomeDuplicate} {
		got, err := d.Deliver(ctx, delivery("1-0"))
		if err != nil || got != want {
			t.Fatalf("Deliver #%d = %s, %v; want %s", i, got, err, want)
		}
	}
	if _, err := d.Deliver(ctx, delivery("2-0")); err != nil || ch.sends() != 1 {
		t.Errorf("another message, same key: %v, %d sends; want 1", err, ch.sends())
	}
	rec, err := d.Ledger().Get(ctx, d.Ledger().Key("{avail.0}", "avail:w_1:ev-1"))
	if err != nil || rec.State != DeliverySent || rec.SentAt.IsZero() || rec.RecipientID != "w_1" || rec.MessageID != "1-0" {
		t.Errorf("record = %+v, %v", rec, err)
	}
	c := counts()
	if c[OutcomeSent] != 1 || c[OutcomeDuplicate] != 3 || c["e2e"] != 1 || c["duration"] != 1 {
		t.Errorf("metrics %v, want 1 sent, 3 duplicates, 1 e2e and 1 duration observation", c)
	}
	if _, err := d.Ledger().Get(ctx, "ds:{avail.0}:ledger:notifier:nothing"); !errors.Is(err, ErrNoDelivery) {
		t.Errorf("Get of a missing record: %v, want ErrNoDelivery", err)
	}
}

func TestDispatcher_failures(t *testing.T) {
	ctx := context.Background()
	retryable := &DeliveryError{Channel: "fake", StatusCode: 500, Retryable: true}
	refused := stream.Permanent(&DeliveryError{Channel: "fake", StatusCode: 400})
	t.Run("retryable failure releases the claim", func(t *testing.T) {
		ch := &fakeChannel{name: "fake", errs: []error{retryable, retryable}}
		d, counts := newDispatcher(t, ch, DeliveryLedgerConfig{})
		for i, want := range []string{OutcomeFailed, OutcomeFailed, OutcomeSent, OutcomeDuplicate} {
			got, err := d.Deliver(ctx, delivery("1-0"))
			if got != want || (err != nil) != (want == OutcomeFailed) || stream.IsPermanent(err) {
				t.Fatalf("Deliver #%d = %s, %v; want %s", i, got, err, want)
			}
		}
		if c := counts(); c[OutcomeFailed] != 2 || c[OutcomeSent] != 1 || ch.sends() != 3 {
			t.Errorf("metrics %v, %d sends", c, ch.sends())
		}
	})
	t.Run("refusal is kept for its message only", func(t *testing.T) {
		ch := &fakeChannel{name: "fake", errs: []error{refused}}
		d, counts := newDispatcher(t, ch, DeliveryLedgerConfig{})
		for i := range 2 {
			got, err := d.Deliver(ctx, delivery("1-0"))
			if got != OutcomeFailed || !stream.IsPermanent(err) {
				t.Fatalf("Deliver #%d = %s, %v; want a permanent failure", i, got, err)
			}
		}
		if ch.sends() != 1 {
			t.Errorf("%d sends for one message, want 1: a refused message is not sent again", ch.sends())
		}
		rec, err := d.Ledger().Get(ctx, d.Ledger().Key("{avail.0}", "avail:w_1:ev-1"))
		if err != nil || rec.State != DeliveryRejected || rec.Error == "" {
			t.Errorf("record = %+v, %v; want rejected with its reason", rec, err)
		}
		// A replay is another message: it tries again.
		if got, err := d.Deliver(ctx, delivery("9-0")); got != OutcomeSent || err != nil || ch.sends() != 2 {
			t.Errorf("replayed message: %s, %v, %d sends", got, err, ch.sends())
		}
		if c := counts(); c[OutcomeFailed] != 1 || c[OutcomeSent] != 1 {
			t.Errorf("metrics %v: the skipped refusal must not count twice", c)
		}
	})
	t.Run("live lease is in flight", func(t *testing.T) {
		ch := &fakeChannel{name: "fake"}
		d, _ := newDispatcher(t, ch, DeliveryLedgerConfig{Lease: time.Hour})
		rec := DeliveryRecord{MessageID: "1-0"}
		key := d.Ledger().Key("{avail.0}", "avail:w_1:ev-1")
		if res, err := d.Ledger().claim(ctx, key, &rec); err != nil || res != claimed {
			t.Fatalf("claim = %s, %v", res, err)
		}
		got, err := d.Deliver(ctx, delivery("2-0"))
		if got != OutcomeFailed || !errors.Is(err, ErrInFlight) || stream.IsPermanent(err) || ch.sends() != 0 {
			t.Errorf("Deliver during another's lease = %s, %v, %d sends", got, err, ch.sends())
		}
		// Only the holder's token releases it.
		if err := d.Ledger().release(ctx, key, DeliveryRecord{Token: "other"}); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Deliver(ctx, delivery("2-0")); !errors.Is(err, ErrInFlight) {
			t.Errorf("a stranger released the lease: %v", err)
		}
		if err := d.Ledger().release(ctx, key, rec); err != nil {
			t.Fatal(err)
		}
		if got, err := d.Deliver(ctx, delivery("2-0")); got != OutcomeSent || err != nil {
			t.Errorf("after release: %s, %v", got, err)
		}
	})
	t.Run("unknown channel is permanent", func(t *testing.T) {
		d, _ := newDispatcher(t, &fakeChannel{name: "fake"}, DeliveryLedgerConfig{})
		del := delivery("1-0")
		del.Channel = "pigeon"
		if _, err := d.Deliver(ctx, del); !errors.Is(err, ErrUnknownChannel) || !stream.IsPermanent(err) {
			t.Errorf("Deliver = %v, want permanent ErrUnknownChannel", err)
		}
	})
	t.Run("a plain ledger mark counts as sent", func(t *testing.T) {
		ch := &fakeChannel{name: "fake"}
		d, _ := newDispatcher(t, ch, DeliveryLedgerConfig{})
		if err := d.ledger.rdb.Set(ctx, d.Ledger().Key("{avail.0}", "avail:w_1:ev-1"), "1", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if got, err := d.Deliver(ctx, delivery("1-0")); got != OutcomeDuplicate || err != nil || ch.sends() != 0 {
			t.Errorf("Deliver over a mark = %s, %v, %d sends", got, err, ch.sends())
		}
	})
}

func TestDeliveryLedgerConfig_validate(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  DeliveryLedgerConfig
		ok   bool
	}{
		{"defaults", DeliveryLedgerConfig{}, true},
		{"bad name", DeliveryLedgerConfig{Name: "Not Valid"}, false},
		{"short lease", DeliveryLedgerConfig{Lease: time.Millisecond}, false},
		{"lease beyond ttl", DeliveryLedgerConfig{Lease: 2 * time.Hour, TTL: time.Hour}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.cfg.WithDefaults().Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate = %v, want ok %v", err, tt.ok)
			}
		})
	}
}

func TestDeliveryLedger_leaseExpires(t *testing.T) {
	ctx := context.Background()
	mr := miniredis.RunT(t)
	ledger, err := NewDeliveryLedger(dial(t, "redis://"+mr.Addr()), DeliveryLedgerConfig{Lease: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ch := &fakeChannel{name: "fake"}
	d, err := NewDispatcher(ledger, map[string]Channel{"fake": ch}, stream.Telemetry{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	// A copy claims and dies before sending or settling.
	key := ledger.Key("{avail.0}", "avail:w_1:ev-1")
	if res, err := ledger.claim(ctx, key, &DeliveryRecord{MessageID: "1-0"}); err != nil || res != claimed {
		t.Fatalf("claim = %s, %v", res, err)
	}
	if _, err := d.Deliver(ctx, delivery("1-0")); !errors.Is(err, ErrInFlight) {
		t.Fatalf("Deliver during the lease: %v, want ErrInFlight", err)
	}
	mr.FastForward(6 * time.Second)
	if got, err := d.Deliver(ctx, delivery("1-0")); got != OutcomeSent || err != nil || ch.sends() != 1 {
		t.Errorf("Deliver after the lease = %s, %v, %d sends; want sent once", got, err, ch.sends())
	}
	if ttl := mr.TTL(key); ttl < DefaultDeliveryTTL-time.Minute {
		t.Errorf("sent record expires in %v, want the ledger ttl", ttl)
	}
}

// A send whose context ended after its claim is not begun, and its
// failure is no attempt; the lease is released for the retry to send.
func TestDispatcher_beginsNoSendOnceTheTimeRanOut(t *testing.T) {
	ch := &fakeChannel{name: "fake"}
	d, _ := newDispatcher(t, ch, DeliveryLedgerConfig{})
	ctx, end := context.WithCancel(context.Background())
	opts := BatchOptions{Before: func(context.Context, []int) []func(context.Context) error { end(); return nil }}
	_, errs := d.DeliverBatch(ctx, []Delivery{delivery("1-0")}, opts)
	if errs[0] == nil || !untried(errs[0]) || ch.sends() != 0 {
		t.Fatalf("out of time: %v (untried %v), %d sends; want an untried failure, nothing sent", errs[0], untried(errs[0]), ch.sends())
	}
	if got, err := d.Deliver(context.Background(), delivery("1-1")); got != OutcomeSent || err != nil || ch.sends() != 1 {
		t.Fatalf("retry = %s, %v, %d sends; want sent once", got, err, ch.sends())
	}
}
