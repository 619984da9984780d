package feed

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/dropstream/dropstream/flows/feed/feedsim"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// pollAssigned polls the feed at the given time and waits for the
// assignment stage only (the delivery stage may not run).
func (h *harness) pollAssigned(at time.Time) {
	h.t.Helper()
	h.clock.Set(at)
	if _, err := h.poller.PollOnce(h.ctx, h.feed); err != nil {
		h.t.Fatal(err)
	}
	testenv.WaitFor(h.t, waitTimeout, func() bool { return stream.Drained(h.ctx, h.rdb, h.flow.topics.Polls, StageAssign) }, "assignment stage did not drain")
}

// collectionsOf returns a subscribable's collections as the API shows
// them (Flow.Collections; the route is tested in httpapi), each as
// "<within> <state> opened=<hh:mm> items=<n>" with its due or completion
// time.
func collectionsOf(t *testing.T, h *harness, name string) []string {
	t.Helper()
	colls, err := h.flow.Collections(h.ctx, h.feed.ID, name)
	if err != nil {
		t.Fatalf("collections of %s: %v", name, err)
	}
	out := []string{}
	for _, c := range colls {
		s := fmt.Sprintf("%s %s opened=%s items=%d", c.Within, c.State, c.Opened.Format("01-02T15:04"), c.Items)
		if c.Due != nil {
			s += " due=" + c.Due.Format("01-02T15:04")
		}
		if c.Completed != nil {
			s += " completed=" + c.Completed.Format("01-02T15:04")
		}
		out = append(out, s)
	}
	return out
}

// collectionNames returns the names (within) of the collections sent.
func (h *harness) collectionNames() []string {
	var out []string
	for _, m := range h.sink.messages("collection") {
		out = append(out, m.Collection)
	}
	return out
}

// A daily collection is cut at its size cap: the window's later items go
// to "<day>+2", "+3"..., never to a collection already completed, and the
// API shows each collection's opened, due and completed times until it is
// delivered and deleted.
func TestFlow_aDailyCollectionIsCutAtItsSizeCap(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			var items []feedsim.Item
			for i := 1; i <= 7; i++ {
				items = append(items, item(fmt.Sprint(i), fmt.Sprint("item ", i)))
			}
			sim := feedsim.New(feedsim.RSS, items...)
			capThree := func(h *harness) { h.flow.cfg.CollectionItems = 3 }
			h := newHarness(t, b, sim, Feed{IncludeExisting: true}, capThree, without(StageDeliver))
			h.subscribe("day", Manager{Kind: Daily})
			h.pollAssigned(t0)
			want := []string{
				"2026-03-02+3 open opened=03-02T09:00 items=1 due=03-03T00:00",
				"2026-03-02 completed opened=03-02T09:00 items=3 due=03-03T00:00 completed=03-02T09:00",
				"2026-03-02+2 completed opened=03-02T09:00 items=3 due=03-03T00:00 completed=03-02T09:00",
			}
			if got := collectionsOf(t, h, "day"); !reflect.DeepEqual(got, want) {
				t.Fatalf("collections before delivery\n%q\nwant\n%q", got, want)
			}

			h.runStage(h.stage(StageDeliver), "", 10*time.Second)
			h.settle()
			if got, want := collectionsOf(t, h, "day"), want[:1]; !reflect.DeepEqual(got, want) {
				t.Fatalf("collections after delivery %q, want %q", got, want)
			}
			// 8 and 9 fill +3; 10 opens the day's name again, free since
			// its collection was delivered.
			sim.Add(item("8", "item 8"), item("9", "item 9"), item("10", "item 10"))
			h.pollAt(t0.Add(time.Minute))
			if got, want := collectionsOf(t, h, "day"), []string{"2026-03-02 open opened=03-02T09:01 items=1 due=03-03T00:00"}; !reflect.DeepEqual(got, want) {
				t.Fatalf("collections %q, want %q", got, want)
			}
			h.pollAt(time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC))

			wantSent := map[string][][]string{"day": {{"1", "2", "3"}, {"4", "5", "6"}, {"7", "8", "9"}, {"10"}}}
			if got := h.delivered(); !reflect.DeepEqual(got, wantSent) {
				t.Fatalf("delivered %v, want %v", got, wantSent)
			}
			if got, want := h.collectionNames(), []string{"2026-03-02", "2026-03-02+2", "2026-03-02+3", "2026-03-02"}; !reflect.DeepEqual(got, want) {
				t.Errorf("collections sent %q, want %q", got, want)
			}
			if got := collectionsOf(t, h, "day"); len(got) != 0 {
				t.Errorf("collections left after delivery %q, want none", got)
			}
			prefix := h.flow.topics.feedPrefix(h.feed.ID)
			if n, err := h.rdb.Exists(h.ctx, prefix+"coll:day:2026-03-02", prefix+"coll:day:2026-03-02:i", prefix+"coll:day:2026-03-02+2",
				prefix+"coll:day:2026-03-02+3", prefix+"completed").Result(); err != nil || n != 0 {
				t.Errorf("%d collection keys left (%v), want none", n, err)
			}
			h.wantAllCleared()
		})
	}
}

// A subscribable deleted and defined again while its completed collection
// waits for delivery: its next items open a collection of their own
// ("1+2") instead of joining the completed one, and every item is sent.
func TestFlow_aSubscribableDefinedAgainNeverAddsToACompletedCollection(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			sim := feedsim.New(feedsim.RSS, item("1", "one"), item("2", "two"))
			h := newHarness(t, b, sim, Feed{IncludeExisting: true}, without(StageDeliver))
			h.subscribe("pairs", Manager{Kind: EveryN, N: 2})
			h.pollAssigned(t0)
			if err := h.flow.store.DeleteSubscribable(h.ctx, h.feed.ID, "pairs"); err != nil {
				t.Fatal(err)
			}
			h.subscribe("pairs", Manager{Kind: EveryN, N: 2})
			sim.Add(item("3", "three"), item("4", "four"))
			h.pollAssigned(t0.Add(time.Minute))
			want := []string{"1 completed opened=03-02T09:00 items=2 completed=03-02T09:00", "1+2 completed opened=03-02T09:01 items=2 completed=03-02T09:01"}
			if got := collectionsOf(t, h, "pairs"); !reflect.DeepEqual(got, want) {
				t.Fatalf("collections %q, want %q", got, want)
			}

			h.runStage(h.stage(StageDeliver), "", 10*time.Second)
			h.settle()
			if got, want := h.delivered(), map[string][][]string{"pairs": {{"1", "2"}, {"3", "4"}}}; !reflect.DeepEqual(got, want) {
				t.Fatalf("delivered %v, want %v", got, want)
			}
			if got := h.historyKinds()[EventDelivered]; got != 4 {
				t.Errorf("%d delivered events, want 4", got)
			}
			h.wantAllCleared()
			// Numbering goes on from the collection completed last.
			sim.Add(item("5", "five"), item("6", "six"))
			h.pollAt(t0.Add(2 * time.Minute))
			if got, want := h.collectionNames(), []string{"1", "1+2", "2"}; !reflect.DeepEqual(got, want) {
				t.Errorf("collections sent %q, want %q", got, want)
			}
		})
	}
}
