package feed

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/dropstream/dropstream/flows/feed/feedsim"
	"github.com/dropstream/dropstream/internal/testenv"
)

// polling returns how the harness's feed is polled.
func (h *harness) polling() FeedPolling {
	h.t.Helper()
	p, err := h.flow.Polling(h.ctx, h.feed.ID)
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

// total returns the sum of an int counter over its attributes.
func (h *harness) total(name string) int64 {
	h.t.Helper()
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		h.t.Fatal(err)
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == name {
				for _, dp := range sum.DataPoints {
					n += dp.Value
				}
			}
		}
	}
	return n
}

// The feed's Cache-Control max-age, its RSS <ttl> and <skipHours> set
// when it is polled next (kept across 304 answers, which carry no
// document), and the feed's gate stays closed until then, for every copy.
func TestEtiquette_CacheControlTTLAndSkipHoursSetTheNextPoll(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			sim := feedsim.New(feedsim.RSS, item("a", "A"))
			h := newHarness(t, b, sim, Feed{IncludeExisting: true, PollEvery: "15m"})
			steps := []struct {
				name   string
				e      feedsim.Etiquette
				at     time.Time
				want   time.Duration
				reason string
			}{
				{"no hints", feedsim.Etiquette{}, t0, 15 * time.Minute, ReasonInterval},
				{"max-age 1h", feedsim.Etiquette{MaxAge: 3600}, t0.Add(time.Hour), time.Hour, ReasonFresh},
				{"ttl 3h", feedsim.Etiquette{MaxAge: 600, TTL: 180}, t0.Add(2 * time.Hour), 3 * time.Hour, ReasonTTL},
				// 11:15 and 12:xx skipped: 13:00
				{"skip hours 11, 12", feedsim.Etiquette{SkipHours: []int{11, 12}}, t0.Add(2 * time.Hour), 2 * time.Hour, ReasonSkip},
			}
			for _, st := range steps {
				sim.SetEtiquette(st.e)
				h.pollAt(st.at)
				p := h.polling()
				if p.NextPoll == nil || !p.NextPoll.Equal(st.at.Add(st.want)) || p.IntervalReason != st.reason {
					t.Fatalf("%s: next poll %v (%s), want %v (%s)", st.name, p.NextPoll, p.IntervalReason, st.at.Add(st.want), st.reason)
				}
			}
			// Unchanged: 304, and the document's skip hours still hold.
			if p := h.pollAt(t0.Add(2 * time.Hour)); !p.NotModified {
				t.Fatalf("unchanged feed: %+v, want 304", p)
			}
			if p := h.polling(); p.IntervalReason != ReasonSkip || p.Requests != 5 || p.NotModified != 2 || p.NotModifiedShare != 0.4 || p.Bytes != sim.Bytes() {
				// the max-age step changed no document: it was a 304 too,
				// whose header still set the next poll
				t.Errorf("after a 304: %+v; want reason skip, 5 requests, 2 not modified (0.4), %d bytes", p.FeedStats, sim.Bytes())
			}
			// Through the gate: held until the next poll for every copy.
			sim.SetEtiquette(feedsim.Etiquette{MaxAge: 7200})
			gate := h.flow.topics.feedPrefix(h.feed.ID) + "poll"
			if err := h.rdb.Del(h.ctx, gate).Err(); err != nil {
				t.Fatal(err)
			}
			h.poller.pollShared(h.ctx, h.feed)
			if ttl := h.rdb.PTTL(h.ctx, gate).Val(); ttl < 119*time.Minute || ttl > 2*time.Hour {
				t.Errorf("gate held %v after max-age 2h, want 2h", ttl)
			}
			if n := h.counter("dropstream.feed.schedules", "reason", ReasonFresh); n != 2 {
				t.Errorf("schedules by freshness: %d, want 2", n)
			}
			if n := h.counter("dropstream.feed.requests", "outcome", "not_modified"); n != 2 {
				t.Errorf("requests answered 304: %d, want 2", n)
			}
		})
	}
}

// A feed whose items arrive every two hours is polled every hour once its
// history shows it.
func TestEtiquette_adaptiveIntervalFollowsTheFeedsArrivals(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			sim := feedsim.New(feedsim.RSS, item("a0", "A0"))
			h := newHarness(t, b, sim, Feed{IncludeExisting: true, PollEvery: "15m"})
			h.pollAt(t0)
			for i := 1; i <= 3; i++ {
				at := t0.Add(time.Duration(i) * 2 * time.Hour)
				h.pollAt(at.Add(-time.Hour)) // nothing new
				sim.Add(item("a"+string(rune('0'+i)), "A"))
				h.pollAt(at)
				if p := h.polling(); i < 2 && p.IntervalReason != ReasonInterval {
					t.Errorf("after %d arrivals: reason %s, want the feed's interval", i+1, p.IntervalReason)
				}
			}
			if p := h.polling(); p.Interval != "1h0m0s" || p.IntervalReason != ReasonAdaptive {
				t.Errorf("after arrivals every 2h: interval %s (%s), want 1h (adaptive)", p.Interval, p.IntervalReason)
			}
		})
	}
}

// A 301 or 308 (every redirect of the chain permanent) updates the feed's
// URL, which is polled from then on; a 302 does not.
func TestEtiquette_permanentRedirectUpdatesTheFeedsURL(t *testing.T) {
	for _, b := range testenv.Backends() {
		for _, mode := range []string{"moved301", "moved308", "found302"} {
			t.Run(b.Name+"/"+mode, func(t *testing.T) {
				sim := feedsim.New(feedsim.RSS, item("a", "A"))
				h := newHarness(t, b, sim, Feed{IncludeExisting: true})
				h.subscribe("each", Manager{Kind: EachItem})
				h.mode.Store(mode)
				if p := h.pollAt(t0); !p.OK || len(p.Items) != 1 {
					t.Fatalf("poll through the redirect: %+v", p)
				}
				fd, err := h.flow.store.Feed(h.ctx, h.feed.ID)
				if err != nil {
					t.Fatal(err)
				}
				want := h.srv.URL + "/feed.xml"
				if mode != "found302" {
					want = h.srv.URL + "/moved.xml"
				}
				if fd.URL != want {
					t.Errorf("feed URL %s, want %s", fd.URL, want)
				}
				if n := h.total("dropstream.feed.moved"); (n == 1) != (mode != "found302") {
					t.Errorf("moved feeds counted %d", n)
				}
			})
		}
	}
}

// A feed answering 410 Gone is no longer polled, shows as gone, and its
// subscribers are told once, without the server's words.
func TestEtiquette_goneFeedStopsAndItsSubscribersAreToldOnce(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			sim := feedsim.New(feedsim.RSS, item("a", "A"))
			h := newHarness(t, b, sim, Feed{IncludeExisting: true})
			h.subscribe("each", Manager{Kind: EachItem})
			h.subscribe("daily", Manager{Kind: Daily, Hour: 8})
			h.pollAt(t0)
			h.mode.Store("gone")
			h.pollAt(t0.Add(time.Hour))
			p := h.polling()
			if p.State != FeedGone || p.Halted == nil || p.NextPoll != nil {
				t.Fatalf("after a 410: %+v, want state gone and no next poll", p)
			}
			told := h.sink.messages(FeedGone)
			if len(told) != 2 || !strings.Contains(told[0].Text, h.feed.URL) || strings.Contains(told[0].Text, "hunter2") {
				t.Fatalf("told %d messages %+v, want one per subscription, naming the feed", len(told), told)
			}
			before, _ := sim.Requests()
			srvBefore := h.total("dropstream.feed.requests")
			if _, err := h.poller.PollOnce(h.ctx, h.feed); !errors.Is(err, ErrHalted) {
				t.Errorf("poll of a gone feed: %v, want ErrHalted", err)
			}
			if err := h.rdb.Del(h.ctx, h.flow.topics.feedPrefix(h.feed.ID)+"poll").Err(); err != nil {
				t.Fatal(err)
			}
			h.poller.pollShared(h.ctx, h.feed)
			if err := h.flow.halt(h.ctx, h.feed, FeedGone, "again", t0.Add(2*time.Hour)); err != nil {
				t.Fatal(err)
			}
			if after, _ := sim.Requests(); after != before || h.total("dropstream.feed.requests") != srvBefore {
				t.Errorf("a gone feed was fetched again")
			}
			if n := len(h.sink.messages(FeedGone)); n != 2 {
				t.Errorf("told %d times after halting again, want still 2", n)
			}
			if n := h.counter("dropstream.feed.halts", "state", FeedGone); n != 1 {
				t.Errorf("halts counted %d, want 1", n)
			}
			// Resumed (the feed is back): polled again.
			h.mode.Store("")
			if err := h.flow.Resume(h.ctx, h.feed.ID); err != nil {
				t.Fatal(err)
			}
			if p := h.pollAt(t0.Add(3 * time.Hour)); !p.OK {
				t.Errorf("poll of a resumed feed: %+v", p)
			}
			if p := h.polling(); p.State != FeedActive || p.Halted != nil {
				t.Errorf("resumed feed: %+v, want active", p)
			}
			if err := h.flow.Resume(h.ctx, "0123456789abcdef"); !errors.Is(err, ErrNotFound) {
				t.Errorf("resume of no feed: %v, want ErrNotFound", err)
			}
		})
	}
}

// After DeadAfter failed polls in a row a feed is dead: shown in its
// record, no longer polled, its subscribers told once.
func TestDead_feedFailingInARowIsMarkedDeadAndToldOnce(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			sim := feedsim.New(feedsim.RSS, item("a", "A"))
			h := newHarnessWith(t, b, sim, Feed{IncludeExisting: true}, func(c *Config) { c.Etiquette.DeadAfter = 3 })
			h.subscribe("each", Manager{Kind: EachItem})
			// An e-mail subscriber of two subscribables, confirmed.
			const willow = "willow@sunnydale.edu"
			for _, name := range []string{"each", "tens"} {
				if name == "tens" {
					if _, _, err := h.flow.store.PutSubscribable(h.ctx, Subscribable{FeedID: h.feed.ID, Name: name, Manager: Manager{Kind: EveryN, N: 10}}); err != nil {
						t.Fatal(err)
					}
				}
				if _, _, err := h.flow.Subscribe(h.ctx, h.feed.ID, name, Destination{Kind: DestEmail, Address: willow}); err != nil {
					t.Fatal(err)
				}
			}
			h.settle()
			if _, _, err := h.subs.Confirm(h.ctx, confirmToken(t, h.mailsTo(willow)[0])); err != nil {
				t.Fatal(err)
			}
			h.pollAt(t0)
			mailsBefore := len(h.mailsTo(willow))
			h.mode.Store("secret500")
			for i := 1; i <= 3; i++ {
				if p := h.polling(); p.State != FeedActive {
					t.Fatalf("after %d failures: %s, want active", i-1, p.State)
				}
				h.pollAt(t0.Add(time.Duration(i) * time.Hour))
			}
			p := h.polling()
			if p.State != FeedDead || p.Halted == nil || !strings.Contains(p.Halted.Reason, "3 failed polls") || strings.Contains(p.Halted.Reason, "hunter2") {
				t.Fatalf("after 3 failures: %+v, want dead with its reason (and not the server's words)", p.Halted)
			}
			h.mode.Store("")
			if _, err := h.poller.PollOnce(h.ctx, h.feed); !errors.Is(err, ErrHalted) {
				t.Errorf("poll of a dead feed: %v, want ErrHalted", err)
			}
			if all, _ := sim.Requests(); all != 1 {
				t.Errorf("the feed's server answered %d good requests, want 1 (none once dead)", all)
			}
			if n := len(h.sink.messages(FeedDead)); n != 1 {
				t.Errorf("told the log destination %d times, want once", n)
			}
			mails := h.mailsTo(willow)[mailsBefore:]
			if len(mails) != 1 || !strings.Contains(mails[0].header.Get("Subject"), "Feed unreachable") || !strings.Contains(mails[0].parts["text/plain"], h.feed.URL) {
				t.Errorf("mails to the e-mail subscriber after the feed died: %d %v, want one telling the feed unreachable", len(mails), mails)
			}
		})
	}
}

// An item republished under a rotated guid (same canonical link, same
// content) is held: not sent, counted on the feed and in the metric. An
// item with the same link and new content is new.
func TestDuplicate_rotatedGUIDIsHeldNotSentAndCounted(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			a := item("a", "A")
			sim := feedsim.New(feedsim.RSS, a)
			h := newHarness(t, b, sim, Feed{IncludeExisting: true})
			h.subscribe("each", Manager{Kind: EachItem})
			h.pollAt(t0)
			rotated := a
			rotated.GUID = "a-rotated"
			tracked := a
			tracked.GUID, tracked.Link = "a-tracked", a.Link+"/?utm_source=rss"
			updated := a
			updated.GUID, updated.Description = "a-updated", "a new text"
			sim.Set(a, rotated, tracked, updated)
			h.pollAt(t0.Add(time.Hour))
			if got := h.delivered()["each"]; len(got) != 2 || got[0][0] != "a" || got[1][0] != "a-updated" {
				t.Fatalf("delivered %v, want a, then only the item with new content", got)
			}
			st := h.states()
			if st["a-rotated"] != StateHeld || st["a-tracked"] != StateHeld {
				t.Errorf("states %v, want the rotated and tracked guids held", st)
			}
			if p := h.polling(); p.HeldDuplicates != 2 {
				t.Errorf("held duplicates %d, want 2", p.HeldDuplicates)
			}
			if n := h.total("dropstream.feed.duplicates.held"); n != 2 {
				t.Errorf("metric of held duplicates %d, want 2", n)
			}
		})
	}
}
