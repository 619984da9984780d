package feed

import (
	"reflect"
	"testing"
	"time"

	"github.com/dropstream/dropstream/flows/feed/feedsim"
	"github.com/dropstream/dropstream/internal/testenv"
)

// A poll that cannot be published is lost, but not its items: the next
// fetch is unconditional (the lost answer's validators were not kept), so
// it observes them, and only then are fetches conditional again.
func TestPoller_aPollNotPublishedIsFetchedAgainInFull(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			sim := feedsim.New(feedsim.RSS, item("a", "A"))
			h := newHarness(t, b, sim, Feed{IncludeExisting: true})
			h.subscribe("each", Manager{Kind: EachItem})
			polls := h.flow.topics.Polls.Stream(h.flow.topics.Polls.Partition(h.feed.ID))
			// The assign stage creates the stream with its group as it starts.
			testenv.WaitFor(t, waitTimeout, func() bool { return h.rdb.Exists(h.ctx, polls).Val() == 1 }, "the polls stream exists")
			// The polls stream is replaced by a string: XADD fails.
			if err := h.rdb.Rename(h.ctx, polls, polls+":saved").Err(); err != nil {
				t.Fatal(err)
			}
			if err := h.rdb.Set(h.ctx, polls, "not a stream", 0).Err(); err != nil {
				t.Fatal(err)
			}
			h.clock.Set(t0)
			if _, err := h.poller.PollOnce(h.ctx, h.feed); err == nil {
				t.Fatal("the poll was published to a string")
			}
			if err := h.rdb.Rename(h.ctx, polls+":saved", polls).Err(); err != nil {
				t.Fatal(err)
			}
			if p := h.pollAt(t0.Add(time.Minute)); !p.OK || p.NotModified || len(p.Items) != 1 {
				t.Fatalf("the poll after a lost one: %+v, want the feed in full", p)
			}
			if got, want := h.delivered(), map[string][][]string{"each": {{"a"}}}; !reflect.DeepEqual(got, want) {
				t.Fatalf("delivered %v, want %v", got, want)
			}
			if p := h.pollAt(t0.Add(2 * time.Minute)); !p.OK || !p.NotModified {
				t.Fatalf("the poll after a published one: %+v, want 304 not modified", p)
			}
			if all, notModified := sim.Requests(); all != 3 || notModified != 1 {
				t.Errorf("the server answered %d requests, %d of them 304; want 3, 1", all, notModified)
			}
		})
	}
}

// Two copies of the poller share each feed's schedule through its gate: a
// feed is fetched by one copy per period whatever the other does, the next
// poll goes to whichever copy comes once the gate opens, and consecutive
// failures (and so the backoff) count across copies.
func TestPoller_copiesShareTheFeedsSchedule(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			sim := feedsim.New(feedsim.RSS, item("a", "A"))
			h := newHarness(t, b, sim, Feed{IncludeExisting: true, PollEvery: "10m"})
			other, err := h.flow.NewPoller(PollerConfig{Now: h.clock.Now, Fetch: pollFetchConfig(), Owner: "copy-b"})
			if err != nil {
				t.Fatal(err)
			}
			gate := h.flow.topics.feedPrefix(h.feed.ID) + "poll"
			polls := h.flow.topics.Polls.Stream(h.flow.topics.Polls.Partition(h.feed.ID))
			fetches := func() int { // every fetch, failed or not, publishes one Poll
				n, err := h.rdb.XLen(h.ctx, polls).Result()
				if err != nil {
					t.Fatal(err)
				}
				return int(n)
			}
			booked := func(p *Poller) time.Duration {
				p.mu.Lock()
				defer p.mu.Unlock()
				return p.next[h.feed.ID].Sub(h.clock.Now())
			}
			// period is the gate's hold after a poll: the delay plus at most
			// a tenth of it for the spread.
			within := func(d, period time.Duration) bool { return d >= period-time.Second && d <= period+period/10 }

			h.poller.pollShared(h.ctx, h.feed)
			if fetches() != 1 {
				t.Fatalf("first copy: %d fetches, want 1", fetches())
			}
			if d := booked(h.poller); !within(d, 10*time.Minute) {
				t.Errorf("first copy looks again in %v, want about the 10m period", d)
			}
			other.pollShared(h.ctx, h.feed)
			h.poller.pollShared(h.ctx, h.feed)
			if fetches() != 1 {
				t.Fatalf("within the period: %d fetches, want still 1", fetches())
			}
			if d := booked(other); !within(d, 10*time.Minute) {
				t.Errorf("the other copy looks again in %v, want when the gate opens, about 10m", d)
			}

			// The period has passed (the gate's hold ended): the next copy
			// to come polls, and a failure counts for both copies.
			h.mode.Store("malformed")
			for i, p := range []*Poller{other, h.poller} {
				if err := h.rdb.Del(h.ctx, gate).Err(); err != nil {
					t.Fatal(err)
				}
				p.pollShared(h.ctx, h.feed)
				if fetches() != 2+i {
					t.Fatalf("after period %d: %d fetches, want %d", i+1, fetches(), 2+i)
				}
				st, ok := h.flow.store.Status(h.ctx, h.feed.ID)
				if !ok || st.OK || st.Failures != i+1 {
					t.Fatalf("status after failed poll %d: %+v, %v; want %d consecutive failures", i+1, st, ok, i+1)
				}
			}
			// Two failures in a row: 2² periods before the next poll, for
			// every copy.
			if d := booked(h.poller); !within(d, 40*time.Minute) {
				t.Errorf("after two failures the poller looks again in %v, want about 40m", d)
			}
			// The other copy finds the gate closed for about 40m; it looks
			// again after a period at most, and polls nothing before the
			// gate opens.
			for range 3 {
				other.pollShared(h.ctx, h.feed)
				if d := booked(other); d <= 0 || d > 10*time.Minute || fetches() != 3 {
					t.Errorf("the other copy: %d fetches, looks again in %v; want 3 fetches and at most the 10m period", fetches(), d)
				}
			}
			if ttl := h.rdb.PTTL(h.ctx, gate).Val(); ttl < 39*time.Minute {
				t.Errorf("the gate's hold after two failures: %v, want about 40m", ttl)
			}

			h.mode.Store("")
			if err := h.rdb.Del(h.ctx, gate).Err(); err != nil {
				t.Fatal(err)
			}
			other.pollShared(h.ctx, h.feed)
			if st, ok := h.flow.store.Status(h.ctx, h.feed.ID); !ok || !st.OK || st.Failures != 0 {
				t.Errorf("status after a good poll: %+v, %v; want ok with no failures", st, ok)
			}
		})
	}
}
