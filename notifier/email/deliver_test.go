package email_test

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/email"
	"github.com/dropstream/dropstream/notifier/history"
	"github.com/dropstream/dropstream/notifier/subscriber"
	"github.com/dropstream/dropstream/stream"
)

// SMTP failures through the notifier's deliver stage: a 452 (mailbox full)
// is retried from the retry schedule and the mail delivered once; a 550
// (no such user) is rejected and its request dead-lettered, never mailed.
func TestChannel_failuresThroughTheDeliverStage(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	full := 2 // 452 answers left for full@example.com
	s := email.StartServer(t, func(to string) error {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case to == "full@example.com" && full > 0:
			full--
			return &smtp.SMTPError{Code: 452, Message: "mailbox full, try later"}
		case to == "nobody@example.com":
			return &smtp.SMTPError{Code: 550, Message: "no such user"}
		}
		return nil
	})
	rdb := testenv.Dial(t, testenv.RedisURL(t))
	tel := stream.Telemetry{Logger: slog.New(slog.DiscardHandler)}
	subs, err := subscriber.NewStore(rdb, subscriber.StoreConfig{Logger: tel.Logger})
	if err != nil {
		t.Fatal(err)
	}
	hist, err := history.NewRecorder(rdb, nil, history.Config{})
	if err != nil {
		t.Fatal(err)
	}
	topic := notifier.RequestTopic(2)
	d, err := notifier.NewDeliverer(rdb, topic, notifier.DeliverDeps{Subscribers: subs, History: hist, Publisher: stream.NewPublisher(rdb, tel),
		Channels: map[string]notifier.Channel{email.ChannelName: email.NewTestChannel(t, s, "s3cret")}},
		notifier.DeliverConfig{Runner: stream.RunnerConfig{Block: 50 * time.Millisecond, StatsInterval: time.Minute},
			Ledger: notifier.DeliveryLedgerConfig{Lease: time.Second},
			Retry:  notifier.RetryConfig{MaxAttempts: 4, Initial: time.Millisecond, Max: 2 * time.Millisecond, PollInterval: 10 * time.Millisecond}},
		tel)
	if err != nil {
		t.Fatal(err)
	}
	runner, err := stream.NewRunner(rdb, d.Stage(), tel)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = runner.Run(runCtx) })
	wg.Go(func() { _ = d.RunRetries(runCtx) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	ids := map[string]string{}
	for _, addr := range []string{"full@example.com", "nobody@example.com"} {
		c, err := subs.Create(ctx, subscriber.Subscriber{Name: addr, Destinations: []subscriber.Destination{{Kind: subscriber.KindEmail, Address: addr}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := subs.Confirm(ctx, c.ConfirmTokens[c.Subscriber.Destinations[0].ID]); err != nil {
			t.Fatal(err)
		}
		ids[addr] = c.Subscriber.ID
		err = notifier.PublishRequests(ctx, stream.NewPublisher(rdb, tel), topic, notifier.Request{Flow: "comic", Event: "comic.match",
			Subject: "comic:42", SubscriberID: c.Subscriber.ID, Window: "w", Title: "Amazing Fantasy #15 is in"})
		if err != nil {
			t.Fatal(err)
		}
	}
	// statuses are a subscriber's history statuses, newest first.
	statuses := func(sub string) (out []string) {
		recs, err := hist.Recent(ctx, sub, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			out = append(out, r.Status)
		}
		return out
	}
	dlq := stream.NewDeadLetters(rdb)
	testenv.WaitFor(t, 20*time.Second, func() bool {
		n, err := dlq.Count(ctx, topic)
		return err == nil && n == 1 && slices.Equal(statuses(ids["full@example.com"]), []string{"sent", "failed", "failed"})
	}, "full@ sent on its third attempt (history %v), nobody@ dead-lettered", statuses(ids["full@example.com"]))
	if st := statuses(ids["nobody@example.com"]); !slices.Equal(st, []string{"rejected"}) {
		t.Fatalf("nobody@ history %v, want rejected", st)
	}
	got := s.Received()
	if len(got) != 1 || got[0].To != "full@example.com" || got[0].Subject() != "Amazing Fantasy #15 is in" || !got[0].TLS {
		t.Fatalf("received %+v, want one mail to full@example.com over TLS", got)
	}
}
