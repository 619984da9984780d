package notifier

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/notifier/history"
	"github.com/dropstream/dropstream/notifier/subscriber"
	"github.com/dropstream/dropstream/notifier/throttle"
	"github.com/dropstream/dropstream/stream"
)

func TestRetryConfig_delayDoublesWithJitter(t *testing.T) {
	c := RetryConfig{Initial: time.Second, Max: 10 * time.Second}.WithDefaults()
	tests := []struct {
		attempt  int
		r        float64
		want     time.Duration
		jittered time.Duration // at r = 0.5
	}{
		{1, 0, 500 * time.Millisecond, 750 * time.Millisecond},
		{1, 0.999999, time.Second, 750 * time.Millisecond},
		{2, 0, time.Second, 1500 * time.Millisecond},
		{3, 0, 2 * time.Second, 3 * time.Second},
		{4, 0.999999, 8 * time.Second, 6 * time.Second},
		{5, 0, 5 * time.Second, 7500 * time.Millisecond}, // capped at Max
		{60, 0, 5 * time.Second, 7500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.attempt), func(t *testing.T) {
			if got := c.Delay(tt.attempt, tt.r); got.Round(time.Millisecond) != tt.want {
				t.Errorf("Delay(%d, %v) = %s, want %s", tt.attempt, tt.r, got, tt.want)
			}
			if got := c.Delay(tt.attempt, 0.5); got != tt.jittered {
				t.Errorf("Delay(%d, 0.5) = %s, want %s", tt.attempt, got, tt.jittered)
			}
		})
	}
}

func TestRetryConfig_validate(t *testing.T) {
	tests := []struct {
		name string
		c    RetryConfig
		ok   bool
	}{
		{"defaults", RetryConfig{}, true},
		{"too many attempts", RetryConfig{MaxAttempts: 101}, false},
		{"max below initial", RetryConfig{Initial: time.Minute, Max: time.Second}, false},
		{"poll too slow", RetryConfig{PollInterval: time.Hour}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.c.WithDefaults().Validate(); (err == nil) != tt.ok {
				t.Fatalf("Validate() = %v, want ok %v", err, tt.ok)
			}
		})
	}
}

// A failed request is acknowledged and filed in the retry schedule, due
// after a pause that doubles with its attempt number, jittered; the filed
// copy carries the next attempt number.
func TestDeliver_retryScheduleGrowsWithJitter(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			w := newWorld(t, b.client(t), throttle.Config{Disabled: true})
			w.d.cfg.Retry = RetryConfig{MaxAttempts: 10, Initial: time.Hour, Max: 8 * time.Hour}.WithDefaults()
			sub := w.subscribe(t, "/a", "", subscriber.Preferences{})
			codes := make([]int, 25)
			for i := range codes {
				codes[i] = 503
			}
			w.hook.answer("", codes...)
			p := w.topic.Partition(sub)
			schedule, entries := w.d.retryKeys(p)
			// handle publishes a request at attempt, handles it as the
			// stage would, and returns its retry's due time and the bounds
			// it must lie in.
			handle := func(attempt, n int) (due, lo, hi time.Time) {
				t.Helper()
				body, err := json.Marshal(req(sub, "comic:"+strconv.Itoa(n), "w"))
				if err != nil {
					t.Fatal(err)
				}
				m := stream.NewMessage(sub, TypeRequest, body)
				m.Metadata = map[string]string{MetaAttempt: strconv.Itoa(attempt)}
				if err := w.pub.Publish(ctx, w.topic, m); err != nil {
					t.Fatal(err)
				}
				m.Attempt = 1
				before := time.Now()
				errs := w.d.handleBatch(ctx, []*stream.Message{m}).(*stream.BatchError).Errs
				after := time.Now()
				if errs[0] != nil {
					t.Fatalf("attempt %d: %v, want acknowledged (scheduled)", attempt, errs[0])
				}
				score, err := w.rdb.ZScore(ctx, schedule, m.ID).Result()
				if err != nil {
					t.Fatalf("attempt %d not scheduled: %v", attempt, err)
				}
				var fields []string
				raw, err := w.rdb.HGet(ctx, entries, m.ID).Result()
				if err != nil || json.Unmarshal([]byte(raw), &fields) != nil {
					t.Fatalf("scheduled entry %q, %v", raw, err)
				}
				next := ""
				for i := 0; i+1 < len(fields); i += 2 {
					if fields[i] == MetaAttempt {
						next = fields[i+1]
					}
				}
				if next != strconv.Itoa(attempt+1) {
					t.Fatalf("scheduled copy carries attempt %q, want %d", next, attempt+1)
				}
				pause := min(time.Hour<<(attempt-1), 8*time.Hour)
				return time.UnixMilli(int64(score)), before.Add(pause / 2).Add(-time.Millisecond), after.Add(pause)
			}
			for attempt := 1; attempt <= 5; attempt++ {
				due, lo, hi := handle(attempt, attempt)
				if due.Before(lo) || due.After(hi) {
					t.Fatalf("attempt %d due at %s, want within [%s, %s]", attempt, due, lo, hi)
				}
			}
			// Jitter: the first pauses of 20 requests spread over [30m, 1h].
			var least, most time.Duration
			for n := range 20 {
				due, lo, _ := handle(1, 100+n)
				d := due.Sub(lo)
				if n == 0 || d < least {
					least = d
				}
				most = max(most, d)
			}
			if most-least < 3*time.Minute {
				t.Fatalf("20 first pauses lie within %s of each other: no jitter", most-least)
			}
			// Nothing is due for an hour: the mover moves none.
			if n, err := w.d.MoveDueRetries(ctx); err != nil || n != 0 {
				t.Fatalf("moved %d, %v; want 0", n, err)
			}
			if n, err := w.rdb.ZCard(ctx, schedule).Result(); err != nil || n != 25 {
				t.Fatalf("%d scheduled, %v; want 25", n, err)
			}
			// Once due, each comes back to the stream once, attempt raised.
			if err := w.rdb.ZRemRangeByRank(ctx, schedule, 1, -1).Err(); err != nil {
				t.Fatal(err)
			}
			ids, _ := w.rdb.ZRange(ctx, schedule, 0, 0).Result()
			if err := w.rdb.ZAdd(ctx, schedule, redis.Z{Score: 1, Member: ids[0]}).Err(); err != nil {
				t.Fatal(err)
			}
			length, _ := w.rdb.XLen(ctx, w.topic.Stream(p)).Result()
			if n, err := w.d.MoveDueRetries(ctx); err != nil || n != 1 {
				t.Fatalf("moved %d, %v; want 1", n, err)
			}
			xs, err := w.rdb.XRevRangeN(ctx, w.topic.Stream(p), "+", "-", 1).Result()
			if after, _ := w.rdb.XLen(ctx, w.topic.Stream(p)).Result(); err != nil || after != length+1 || xs[0].Values[MetaAttempt] != "2" {
				t.Fatalf("stream grew from %d to %d, newest %+v, %v: want one entry at attempt 2", length, after, xs, err)
			}
			if n, err := w.d.MoveDueRetries(ctx); err != nil || n != 0 {
				t.Fatalf("moved again %d, %v; want 0", n, err)
			}
		})
	}
}

// A 429's Retry-After puts the retry after it, however short the backoff.
func TestDeliver_retryWaitsOutRetryAfter(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, mini(t), throttle.Config{Destination: throttle.Limit{Rate: 1000, Burst: 1000}})
	sub := w.subscribe(t, "/a", "", subscriber.Preferences{})
	w.hook.answer("120", 429)
	m := w.published(t, req(sub, "comic:1", "w"))
	before := time.Now()
	if errs := w.d.handleBatch(ctx, []*stream.Message{m}).(*stream.BatchError).Errs; errs[0] != nil {
		t.Fatalf("429: %v, want acknowledged (scheduled)", errs[0])
	}
	schedule, _ := w.d.retryKeys(m.Partition)
	score, err := w.rdb.ZScore(ctx, schedule, m.ID).Result()
	if due := time.UnixMilli(int64(score)); err != nil || due.Before(before.Add(120*time.Second)) {
		t.Fatalf("retry due at %s, %v; want after the 120s Retry-After", due, err)
	}
}

// The handler's context may end while a receiver answers (its deadline
// passed on a loaded machine): the answer decides all the same. The retry
// is filed and the message acknowledged, not left pending for a
// redelivery at the same attempt, and the Retry-After is kept.
func TestDeliver_answerAsTheHandlerEndsStillFilesItsRetry(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, mini(t), throttle.Config{Destination: throttle.Limit{Rate: 1000, Burst: 1000}})
	sub := w.subscribe(t, "/a", "", subscriber.Preferences{})
	hctx, end := context.WithCancel(ctx)
	defer end()
	w.d.dispatch.channels[ChannelWebhook] = endingChannel{end: end}
	m := w.published(t, req(sub, "comic:1", "w"))
	if errs := w.d.handleBatch(hctx, []*stream.Message{m}).(*stream.BatchError).Errs; errs[0] != nil {
		t.Fatalf("503 as the handler ended: %v, want acknowledged (scheduled)", errs[0])
	}
	schedule, _ := w.d.retryKeys(m.Partition)
	if _, err := w.rdb.ZScore(ctx, schedule, m.ID).Result(); err != nil {
		t.Fatalf("retry not filed: %v", err)
	}
	if st := w.statuses(t, sub); !slices.Equal(st, []string{"failed"}) {
		t.Fatalf("history %v, want one failed attempt", st)
	}
	next := &stream.Message{ID: "1-1", Partition: m.Partition, Type: TypeRequest, Attempt: 1}
	if err := w.d.Deliver(ctx, next, req(sub, "comic:2", "w")); !errors.Is(err, ErrThrottled) {
		t.Fatalf("within Retry-After: %v, want ErrThrottled", err)
	}
}

// endingChannel answers every send with a 503 and a Retry-After, ending
// the handler's context as it answers.
type endingChannel struct{ end context.CancelFunc }

func (endingChannel) Name() string { return ChannelWebhook }

func (c endingChannel) Send(context.Context, Notification) error {
	c.end()
	return &DeliveryError{Channel: ChannelWebhook, StatusCode: 503, Retryable: true, RetryAfter: 2 * time.Minute}
}

// published publishes r and returns its message as the stage reads it.
func (w *world) published(t *testing.T, r Request) *stream.Message {
	t.Helper()
	body, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	m := stream.NewMessage(r.SubscriberID, TypeRequest, body)
	if err := w.pub.Publish(context.Background(), w.topic, m); err != nil {
		t.Fatal(err)
	}
	m.Attempt = 1
	return m
}

// A request whose handler's time ran out before its send (a loaded
// machine) was not tried: even on its last attempt it is retried on that
// attempt, not dead-lettered, and no failure is recorded. Handled again in
// time, as its retry is, it is sent at that attempt.
func TestDeliver_timeRunningOutBeforeTheSendUsesNoAttempt(t *testing.T) {
	for _, inline := range []bool{false, true} {
		t.Run("inline "+strconv.FormatBool(inline), func(t *testing.T) {
			ctx := context.Background()
			w := newWorld(t, mini(t), throttle.Config{Disabled: true})
			sub := w.subscribe(t, "/a", "", subscriber.Preferences{})
			r := req(sub, "comic:1", "w")
			if inline { // no subscriber to resolve: the time runs out at the claim
				r.Destination = &subscriber.Destination{Kind: subscriber.KindWebhook, Address: w.hook.srv.URL + "/b", Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}
			}
			m := w.published(t, r)
			last := strconv.Itoa(fastRetry.MaxAttempts)
			m.Metadata = map[string]string{MetaAttempt: last}
			ended, end := context.WithCancel(ctx)
			end()
			if errs := w.d.handleBatch(ended, []*stream.Message{m}).(*stream.BatchError).Errs; errs[0] != nil {
				t.Fatalf("last attempt out of time: %v, want acknowledged and retried", errs[0])
			}
			_, entries := w.d.retryKeys(m.Partition)
			var fields []string
			raw, err := w.rdb.HGet(ctx, entries, m.ID).Result()
			if err != nil || json.Unmarshal([]byte(raw), &fields) != nil || !slices.Contains(fields, MetaAttempt) ||
				fields[slices.Index(fields, MetaAttempt)+1] != last {
				t.Fatalf("retry %q, %v: want one filed at attempt %s", raw, err, last)
			}
			if n, st := w.hook.callCount(), w.statuses(t, sub); n != 0 || len(st) != 0 {
				t.Fatalf("%d calls, history %v: want none", n, st)
			}
			if errs := w.d.handleBatch(ctx, []*stream.Message{m}).(*stream.BatchError).Errs; errs[0] != nil {
				t.Fatalf("in time: %v", errs[0])
			}
			recs, err := w.hist.Recent(ctx, sub, 10)
			if err != nil || len(recs) != 1 || recs[0].Status != history.StatusSent || recs[0].Attempts != fastRetry.MaxAttempts {
				t.Fatalf("history %+v, %v: want sent at attempt %s", recs, err, last)
			}
		})
	}
}
