package feed

import (
	"reflect"
	"testing"
	"time"

	"github.com/dropstream/dropstream/flows/feed/feedsim"
	"github.com/dropstream/dropstream/internal/testenv"
)

func TestStore_deleteSubscribableClosesItsOpenCollectionsAndReleasesTheirItems(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			sim := feedsim.New(feedsim.RSS, item("1", "one"), item("2", "two"))
			h := newHarness(t, b, sim, Feed{IncludeExisting: true})
			h.subscribe("each", Manager{Kind: EachItem})
			h.subscribe("trio", Manager{Kind: EveryN, N: 3})
			h.subscribe("day", Manager{Kind: Daily, Hour: 8})
			h.pollAt(t0)
			prefix := h.flow.topics.feedPrefix(h.feed.ID)
			open := func() []string {
				t.Helper()
				m, err := h.rdb.ZRange(h.ctx, prefix+"open", 0, -1).Result()
				if err != nil {
					t.Fatal(err)
				}
				return m
			}
			if got, want := open(), []string{"day\x002026-03-02", "trio\x001"}; !reflect.DeepEqual(got, want) {
				t.Fatalf("open collections %q, want %q", got, want)
			}

			if err := h.flow.store.DeleteSubscribable(h.ctx, h.feed.ID, "trio"); err != nil {
				t.Fatal(err)
			}
			if got, want := open(), []string{"day\x002026-03-02"}; !reflect.DeepEqual(got, want) {
				t.Fatalf("open collections after deleting trio %q, want %q", got, want)
			}
			if n, err := h.rdb.Exists(h.ctx, prefix+"coll:trio:1", prefix+"coll:trio:1:i").Result(); err != nil || n != 0 {
				t.Fatalf("trio's collection keys: %d left (%v), want none", n, err)
			}
			if got, want := h.states(), map[string]string{"1": StateAssigned, "2": StateAssigned}; !reflect.DeepEqual(got, want) {
				t.Fatalf("states %v, want %v (the daily collection still waits for them)", got, want)
			}
			if err := h.flow.store.DeleteSubscribable(h.ctx, h.feed.ID, "day"); err != nil {
				t.Fatal(err)
			}
			if got := open(); len(got) != 0 {
				t.Fatalf("open collections after deleting day %q, want none", got)
			}
			if got, want := h.states(), map[string]string{"1": StateCleared, "2": StateCleared}; !reflect.DeepEqual(got, want) {
				t.Fatalf("states %v, want %v (no collection waits for them)", got, want)
			}

			// trio defined again starts afresh; day's window passes unsent.
			h.subscribe("trio", Manager{Kind: EveryN, N: 3})
			sim.Add(item("3", "three"), item("4", "four"), item("5", "five"))
			h.pollAt(t0.Add(time.Minute))
			h.pollAt(t0.Add(25 * time.Hour))
			want := map[string][][]string{"each": {{"1"}, {"2"}, {"3"}, {"4"}, {"5"}}, "trio": {{"3", "4", "5"}}}
			if got := h.delivered(); !reflect.DeepEqual(got, want) {
				t.Fatalf("delivered %v, want %v", got, want)
			}
			h.wantAllCleared()
			if got := h.historyKinds()[EventCleared]; got != 5 {
				t.Errorf("%d cleared events, want 5", got)
			}
		})
	}
}
