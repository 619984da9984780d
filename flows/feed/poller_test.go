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
