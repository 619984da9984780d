package feed

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/flows/feed/feedsim"
	"github.com/dropstream/dropstream/internal/testenv"
)

func TestFlow_eachItemWaitsForStabilityAndNeverResendsAClearedGUID(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			sim := feedsim.New(feedsim.RSS, item("a", "A"), item("b", "B"))
			h := newHarness(t, b, sim, Feed{AwaitStabilizationMinutes: 10, MaxDelayMinutes: 60, IncludeExisting: true})
			h.subscribe("each", Manager{Kind: EachItem})

			h.pollAt(t0)
			sim.Set(item("a", "A edited"), item("b", "B"), item("c", "C"))
			h.pollAt(t0.Add(5 * time.Minute))
			if got := h.delivered(); len(got) != 0 {
				t.Fatalf("after 5 minutes delivered %v, want nothing (nothing stable for 10 minutes)", got)
			}
			h.pollAt(t0.Add(10 * time.Minute))
			// c vanishes before it is assigned: its cached content is still sent.
			sim.Set(item("a", "A edited"), item("b", "B"))
			h.pollAt(t0.Add(15 * time.Minute))
			// c reappears after it was cleared: never sent again.
			sim.Set(item("a", "A edited"), item("b", "B"), item("c", "C"))
			h.pollAt(t0.Add(20 * time.Minute))
			h.pollAt(t0.Add(90 * time.Minute))

			want := map[string][][]string{"each": {{"b"}, {"a"}, {"c"}}}
			if got := h.delivered(); !reflect.DeepEqual(got, want) {
				t.Fatalf("delivered %v, want %v", got, want)
			}
			if got := h.sink.messages("collection")[1].Items[0].Title; got != "A edited" {
				t.Errorf("a was sent with title %q, want the edited one", got)
			}
			wantStates := map[string]string{"a": StateCleared, "b": StateCleared, "c": StateCleared}
			if got := h.states(); !reflect.DeepEqual(got, wantStates) {
				t.Errorf("states %v, want %v", got, wantStates)
			}
			items, _ := h.flow.Items(h.ctx, h.feed.ID, 0, 10)
			for _, it := range items {
				if it.Content != nil || it.Hash == "" || it.GUID == "" {
					t.Errorf("cleared item %s keeps content %v or lost its identity/hash", it.GUID, it.Content)
				}
			}
		})
	}
}

func TestFlow_maxDelayAssignsAnItemThatNeverSettles(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			sim := feedsim.New(feedsim.Atom, item("x", "v0"))
			h := newHarness(t, b, sim, Feed{MinDelayMinutes: 5, AwaitStabilizationMinutes: 10, MaxDelayMinutes: 30, IncludeExisting: true})
			h.subscribe("each", Manager{Kind: EachItem})
			for i := 0; i <= 5; i++ {
				sim.Set(item("x", "v"+string(rune('0'+i))))
				h.pollAt(t0.Add(time.Duration(i) * 6 * time.Minute))
				wantN := 0
				if i == 5 { // 30 minutes after first seen
					wantN = 1
				}
				if got := len(h.sink.messages("collection")); got != wantN {
					t.Fatalf("after %d minutes %d deliveries, want %d", i*6, got, wantN)
				}
			}
			if got := h.sink.messages("collection")[0].Items[0].Title; got != "v5" {
				t.Errorf("sent title %q, want the latest v5", got)
			}
		})
	}
}

func TestFlow_everyNCollectsNItems(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			sim := feedsim.New(feedsim.RSS, item("1", "one"), item("2", "two"), item("3", "three"), item("4", "four"), item("5", "five"))
			h := newHarness(t, b, sim, Feed{IncludeExisting: true})
			h.subscribe("pairs", Manager{Kind: EveryN, N: 2})
			h.pollAt(t0)
			if got, want := h.delivered(), map[string][][]string{"pairs": {{"1", "2"}, {"3", "4"}}}; !reflect.DeepEqual(got, want) {
				t.Fatalf("delivered %v, want %v", got, want)
			}
			sim.Add(item("6", "six"))
			h.pollAt(t0.Add(time.Minute))
			h.pollAt(t0.Add(2 * time.Minute))
			if got, want := h.delivered(), map[string][][]string{"pairs": {{"1", "2"}, {"3", "4"}, {"5", "6"}}}; !reflect.DeepEqual(got, want) {
				t.Fatalf("delivered %v, want %v", got, want)
			}
		})
	}
}

func TestFlow_dailyDigestInATimeZone(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			// t0 is 04:00 in New York (EST): the window opened Sunday 08:00
			// and ends Monday 08:00 New York, 13:00 UTC.
			sim := feedsim.New(feedsim.RSS, item("1", "one"), item("2", "two"))
			h := newHarness(t, b, sim, Feed{IncludeExisting: true})
			h.subscribe("daily", Manager{Kind: Daily, Hour: 8, TimeZone: "America/New_York"})
			h.pollAt(t0)
			sim.Add(item("3", "three"))
			h.pollAt(time.Date(2026, 3, 2, 12, 59, 0, 0, time.UTC))
			if got := h.delivered(); len(got) != 0 {
				t.Fatalf("before the window ends delivered %v", got)
			}
			sim.Add(item("4", "four"))
			h.pollAt(time.Date(2026, 3, 2, 13, 1, 0, 0, time.UTC))
			if got, want := h.delivered(), map[string][][]string{"daily": {{"1", "2", "3"}}}; !reflect.DeepEqual(got, want) {
				t.Fatalf("delivered %v, want %v", got, want)
			}
			if got := h.sink.messages("collection")[0].Collection; got != "2026-03-01" {
				t.Errorf("collection %q, want 2026-03-01", got)
			}
			h.pollAt(time.Date(2026, 3, 3, 12, 0, 0, 0, time.UTC))
			h.pollAt(time.Date(2026, 3, 3, 13, 0, 0, 0, time.UTC))
			if got, want := h.delivered(), map[string][][]string{"daily": {{"1", "2", "3"}, {"4"}}}; !reflect.DeepEqual(got, want) {
				t.Fatalf("delivered %v, want %v", got, want)
			}
		})
	}
}

func TestFlow_weeklyDigestAtTheChosenDayAndHour(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			sim := feedsim.New(feedsim.Atom, item("1", "one"))
			h := newHarness(t, b, sim, Feed{IncludeExisting: true})
			h.subscribe("weekly", Manager{Kind: Weekly, Weekday: "friday", Hour: 17, TimeZone: "Europe/Paris"})
			h.subscribe("each", Manager{Kind: EachItem})
			h.pollAt(t0) // Monday
			sim.Add(item("2", "two"))
			h.pollAt(time.Date(2026, 3, 5, 10, 0, 0, 0, time.UTC))  // Thursday
			h.pollAt(time.Date(2026, 3, 6, 15, 59, 0, 0, time.UTC)) // Friday 16:59 Paris
			if got := len(h.delivered()["weekly"]); got != 0 {
				t.Fatalf("weekly sent %d collections before Friday 17:00 Paris", got)
			}
			h.pollAt(time.Date(2026, 3, 6, 16, 0, 0, 0, time.UTC))
			want := map[string][][]string{"weekly": {{"1", "2"}}, "each": {{"1"}, {"2"}}}
			if got := h.delivered(); !reflect.DeepEqual(got, want) {
				t.Fatalf("delivered %v, want %v", got, want)
			}
			// Cleared only once both collections were delivered.
			if got := h.states(); got["1"] != StateCleared || got["2"] != StateCleared {
				t.Errorf("states %v, want both cleared", got)
			}
		})
	}
}

func TestFlow_itemsOfTheFirstPollAreExcludedByDefault(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			sim := feedsim.New(feedsim.RSS, item("old", "archive"))
			h := newHarness(t, b, sim, Feed{})
			h.subscribe("each", Manager{Kind: EachItem})
			h.pollAt(t0)
			sim.Add(item("new", "fresh"))
			h.pollAt(t0.Add(time.Minute))
			if got, want := h.delivered(), map[string][][]string{"each": {{"new"}}}; !reflect.DeepEqual(got, want) {
				t.Fatalf("delivered %v, want %v", got, want)
			}
			if got := h.states()["old"]; got != StateExcluded {
				t.Errorf("old item %s, want excluded", got)
			}
		})
	}
}

// TestFlow_tenantsSubscribablesOfOneFeedAreEachDelivered has three
// tenants define a subscribable of the same name on one feed, each with
// its own manager: each gets its own collections, under the name it gave
// (no tenant tag shows), and deleting one tenant's leaves the others'.
func TestFlow_tenantsSubscribablesOfOneFeedAreEachDelivered(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			sim := feedsim.New(feedsim.RSS, item("1", "one"), item("2", "two"))
			h := newHarness(t, b, sim, Feed{IncludeExisting: true})
			tenants := []struct {
				tenant string
				m      Manager
			}{{"", Manager{Kind: EachItem}}, {"acme", Manager{Kind: EveryN, N: 2}}, {"globex", Manager{Kind: EachItem}}}
			for _, tc := range tenants {
				sb, created, err := h.flow.store.PutSubscribable(h.ctx, Subscribable{FeedID: h.feed.ID, Name: "news", Tenant: tc.tenant, Manager: tc.m})
				if err != nil || !created || sb.Key() != SubscribableKey(tc.tenant, "news") {
					t.Fatalf("%q's subscribable %+v created %v: %v", tc.tenant, sb, created, err)
				}
				sub, _, err := h.flow.Subscribe(h.ctx, h.feed.ID, sb.Key(), Destination{Kind: DestLog, Name: "reader"})
				if err != nil || !sub.Confirmed || sub.Subscribable != "news" || sub.Tenant != tc.tenant {
					t.Fatalf("%q's subscription %+v: %v", tc.tenant, sub, err)
				}
			}
			h.pollAt(t0)
			// Open's and globex's one item each, acme's a pair.
			if got, want := h.delivered(), map[string][][]string{"news": {{"1"}, {"1"}, {"1", "2"}, {"2"}, {"2"}}}; !reflect.DeepEqual(sortedCollections(got), want) {
				t.Fatalf("delivered %v, want %v", got, want)
			}
			if err := h.flow.store.DeleteSubscribable(h.ctx, h.feed.ID, SubscribableKey("globex", "news")); err != nil {
				t.Fatal(err)
			}
			left, err := h.flow.store.Subscribables(h.ctx, h.feed.ID)
			var owners []string
			for _, sb := range left {
				owners = append(owners, sb.Tenant)
			}
			if slices.Sort(owners); err != nil || !slices.Equal(owners, []string{"", "acme"}) {
				t.Errorf("subscribables after globex's delete: %+v, %v", left, err)
			}
		})
	}
}

// sortedCollections returns delivered with each subscribable's
// collections sorted, for collections whose order is not the test's.
func sortedCollections(delivered map[string][][]string) map[string][][]string {
	for _, colls := range delivered {
		slices.SortFunc(colls, func(a, b []string) int { return strings.Compare(strings.Join(a, ","), strings.Join(b, ",")) })
	}
	return delivered
}
