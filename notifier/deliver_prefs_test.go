package notifier

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/notifier/digest"
	"github.com/dropstream/dropstream/notifier/subscriber"
	"github.com/dropstream/dropstream/notifier/throttle"
	"github.com/dropstream/dropstream/stream"
)

// msgAt is a request message published at t (its entry id's time).
func msgAt(w *world, sub string, t time.Time) *stream.Message {
	return &stream.Message{ID: strconv.FormatInt(t.UnixMilli(), 10) + "-0", Partition: w.topic.Partition(sub), Type: TypeRequest, Attempt: 1}
}

func subjects(ms []Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Subject
	}
	return out
}

func TestDeliver_preferences(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, mini(t), throttle.Config{Disabled: true})
	picky := w.subscribe(t, "/picky", "", subscriber.Preferences{Include: []string{"comic:*"}, Exclude: []string{"comic:9*"}})
	off := w.subscribe(t, "/off", "", subscriber.Preferences{Channels: map[string]bool{"webhook": false}})
	now := w.clock()
	for _, s := range []string{"comic:1", "comic:90", "feed:1"} {
		if err := w.d.Deliver(ctx, msgAt(w, picky, now), req(picky, s, "w")); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.d.Deliver(ctx, msgAt(w, off, now), req(off, "comic:1", "w")); err != nil {
		t.Fatal(err)
	}
	if got := subjects(w.hook.messages()); !slices.Equal(got, []string{"comic:1"}) {
		t.Fatalf("received %v, want only comic:1 for the picky subscriber", got)
	}
	if st := w.statuses(t, picky); !slices.Equal(st, []string{"sent", "suppressed", "suppressed"}) {
		t.Fatalf("picky history %v", st)
	}
	if st := w.statuses(t, off); !slices.Equal(st, []string{"suppressed"}) {
		t.Fatalf("channel-off history %v", st)
	}
}

// Quiet hours in the subscriber's zone hold non-critical notifications and
// send them as one digest when they end; critical ones go at once. The
// instant is quiet in Tokyo and not in New York.
func TestDeliver_quietHoursAcrossTimeZones(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, mini(t), throttle.Config{Disabled: true})
	qh := subscriber.Preferences{QuietHours: &subscriber.QuietHours{Start: "22:00", End: "07:00"}}
	tokyo := w.subscribe(t, "/tokyo", "Asia/Tokyo", qh)
	ny := w.subscribe(t, "/ny", "America/New_York", qh)
	// 2026-11-22 14:30 UTC: 23:30 in Tokyo (quiet), 09:30 in New York.
	at := time.Date(2026, 11, 22, 14, 30, 0, 0, time.UTC)
	w.setNow(at)
	for _, sub := range []string{tokyo, ny} {
		for _, s := range []string{"comic:1", "comic:2"} {
			if err := w.d.Deliver(ctx, msgAt(w, sub, at), req(sub, s, "w")); err != nil {
				t.Fatal(err)
			}
		}
		crit := req(sub, "comic:alarm", "w")
		crit.Critical = true
		if err := w.d.Deliver(ctx, msgAt(w, sub, at), crit); err != nil {
			t.Fatal(err)
		}
	}
	byPath := func() map[string][]string {
		out := map[string][]string{}
		for _, m := range w.hook.messages() {
			out[m.SubscriberID] = append(out[m.SubscriberID], m.Subject)
		}
		return out
	}
	got := byPath()
	if !slices.Equal(got[ny], []string{"comic:1", "comic:2", "comic:alarm"}) || !slices.Equal(got[tokyo], []string{"comic:alarm"}) {
		t.Fatalf("during Tokyo's quiet hours: %v", got)
	}
	// Nothing is due before 07:00 Tokyo (22:00 UTC).
	w.setNow(time.Date(2026, 11, 22, 21, 59, 0, 0, time.UTC))
	if n, err := w.d.FlushDigests(ctx); err != nil || n != 0 {
		t.Fatalf("flush before the end: %d, %v", n, err)
	}
	w.setNow(time.Date(2026, 11, 22, 22, 0, 0, 0, time.UTC))
	if n, err := w.d.FlushDigests(ctx); err != nil || n != 1 {
		t.Fatalf("flush at the end: %d, %v; want 1 digest", n, err)
	}
	deliverPublished(t, w)
	got = byPath()
	if !slices.Equal(got[tokyo], []string{"comic:alarm", "digest"}) {
		t.Fatalf("after quiet hours Tokyo got %v, want the alarm then one digest", got[tokyo])
	}
	var pl DigestPayload
	for _, m := range w.hook.messages() {
		if m.Digest {
			if err := json.Unmarshal(m.Payload, &pl); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(pl.Items) != 2 || pl.Items[0].Subject != "comic:1" || pl.Items[1].Subject != "comic:2" {
		t.Fatalf("digest payload %+v, want the two held notifications", pl)
	}
}

// deliverPublished runs the deliver stage's handler over every request
// message published so far that it has not seen, in order.
func deliverPublished(t *testing.T, w *world) {
	t.Helper()
	ctx := context.Background()
	if err := stream.EnsureGroups(ctx, w.rdb, w.topic, "test-drain"); err != nil {
		t.Fatal(err)
	}
	for p := 0; p < w.topic.Partitions; p++ {
		xs, err := w.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "test-drain", Consumer: "t", Streams: []string{w.topic.Stream(p), ">"},
			Count: 1000, Block: -1}).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
		for _, x := range xs {
			for _, e := range x.Messages {
				payload, _ := e.Values["payload"].(string)
				typ, _ := e.Values["type"].(string)
				m := &stream.Message{ID: e.ID, Stream: x.Stream, Partition: p, Type: typ, Payload: []byte(payload), Attempt: 1}
				if err := w.d.handle(ctx, m); err != nil {
					t.Fatalf("deliver %s: %v", e.ID, err)
				}
			}
		}
	}
}

// Digest windows: a daily digest at 08:00 local batches the day's
// notifications into one message; processing the window twice sends it
// once; every 3 sends a digest per 3 notifications.
func TestDeliver_digestWindows(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, mini(t), throttle.Config{Disabled: true})
	daily := w.subscribe(t, "/daily", "Europe/Paris", subscriber.Preferences{Digest: digest.Policy{Mode: digest.ModeDaily, At: "08:00"}})
	every := w.subscribe(t, "/every", "", subscriber.Preferences{Digest: digest.Policy{Mode: digest.ModeEvery, Every: 3}})
	day1 := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC) // 10:00 Paris: window ends 23 Nov 08:00 Paris
	w.setNow(day1)
	for i, s := range []string{"a", "b", "c"} {
		m := msgAt(w, daily, day1.Add(time.Duration(i)*time.Hour))
		if err := w.d.Deliver(ctx, m, req(daily, s, "w")); err != nil {
			t.Fatal(err)
		}
		if i == 0 { // a redelivery of the first request files it once
			if err := w.d.Deliver(ctx, m, req(daily, s, "w")); err != nil {
				t.Fatal(err)
			}
		}
	}
	late := time.Date(2026, 11, 23, 7, 30, 0, 0, time.UTC) // 08:30 Paris: next window
	if err := w.d.Deliver(ctx, msgAt(w, daily, late), req(daily, "d", "w")); err != nil {
		t.Fatal(err)
	}
	for i, s := range []string{"1", "2", "3", "4"} {
		if err := w.d.Deliver(ctx, msgAt(w, every, day1.Add(time.Duration(i)*time.Minute)), req(every, s, "w")); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(w.hook.messages()); n != 0 {
		t.Fatalf("%d messages sent before any window ended", n)
	}
	w.setNow(time.Date(2026, 11, 23, 7, 0, 0, 0, time.UTC)) // 08:00 Paris
	if n, err := w.d.FlushDigests(ctx); err != nil || n != 2 {
		t.Fatalf("flush: %d, %v; want the daily and the full every-3 window", n, err)
	}
	// The same windows processed twice: the flusher crashed before it
	// forgot them, so they are published again.
	deliverPublished(t, w)
	var reqs []Request
	for _, m := range w.hook.messages() {
		var r Request
		r.Flow, r.Event, r.Subject, r.SubscriberID, r.DestinationID, r.Window, r.Digest, r.Critical, r.Payload =
			"digest", "digest", "digest", m.SubscriberID, m.DestinationID, m.Window, true, true, m.Payload
		reqs = append(reqs, r)
	}
	w.publish(t, reqs...)
	deliverPublished(t, w)
	var got []string
	for _, m := range w.hook.messages() {
		var pl DigestPayload
		if err := json.Unmarshal(m.Payload, &pl); err != nil {
			t.Fatal(err)
		}
		var items []string
		for _, it := range pl.Items {
			items = append(items, it.Subject)
		}
		got = append(got, pathOf(m, daily, every)+":"+strings.Join(items, ","))
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"daily:a,b,c", "every:1,2,3"}) {
		t.Fatalf("digests %v, want one daily digest of a, b, c and one of 1, 2, 3", got)
	}
}

func pathOf(m Message, daily, every string) string {
	switch m.SubscriberID {
	case daily:
		return "daily"
	case every:
		return "every"
	}
	return "?"
}
