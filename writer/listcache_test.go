package writer_test

import (
	"encoding/json"

	"fmt"
	"github.com/alicebob/miniredis/v2"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/internal/telemetrytest"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer"
)

// renderList renders a page as the tests compare them.
func renderList(items []writer.EntityState, next string) ([]byte, error) {
	return json.Marshal(struct {
		Items []writer.EntityState `json:"items"`
		Next  string               `json:"next_cursor"`
	}{items, next})
}

// TestListCache_servesWhatListServesNow interleaves transitions (raw and
// stable, on every partition) with pages read through the cache and
// directly: every cached page must equal the direct one, and pages read
// twice without a transition between must be served again.
func TestListCache_servesWhatListServesNow(t *testing.T) {
	filters := []writer.Filter{{}, {State: writer.StateOpen}, {Venue: "v2", State: writer.StateOpen},
		{Provider: "resy", Venue: "v1"}, {PartySize: 4, State: writer.StateClosed}, {Date: "2099-03-09"}}
	for _, be := range testenv.WithCluster() {
		t.Run(be.Name, func(t *testing.T) {
			mp, collect := telemetrytest.Metrics(t)
			p, err := writer.NewProjection(be.Client(t), writer.ProjectionConfig{Partitions: partitions}, stream.Telemetry{MeterProvider: mp})
			if err != nil {
				t.Fatal(err)
			}
			cache := p.NewListCache(renderList)
			topic := avail.NewTopics(partitions).Transitions
			entities := slots([]string{"resy", "opentable"}, []string{"v1", "v2", "v3"})
			rng := rand.New(rand.NewPCG(1, 2))
			check := func(step int, f writer.Filter, limit int) {
				t.Helper()
				var cursor string
				for range 100 { // every page of the filter
					got, err := cache.Page(t.Context(), f, cursor, limit)
					if err != nil {
						t.Fatalf("step %d: Page(%+v): %v", step, f, err)
					}
					items, next, err := p.List(t.Context(), f, cursor, limit)
					if err != nil {
						t.Fatalf("step %d: List(%+v): %v", step, f, err)
					}
					want, _ := renderList(items, next)
					if string(got) != string(want) {
						t.Fatalf("step %d: filter %+v cursor %q: cached page\n%s\nwant\n%s", step, f, cursor, got, want)
					}
					if cursor = next; cursor == "" {
						return
					}
				}
				t.Fatalf("step %d: filter %+v: more than 100 pages", step, f)
			}
			for step := range 300 {
				if rng.IntN(3) == 0 {
					e := entities[rng.IntN(len(entities))]
					kind := []string{"open", "close"}[rng.IntN(2)]
					tr := transition(e, kind, step+1, rng.IntN(4) == 0)
					tr.ScopeKey = fmt.Sprintf("scope-%d", rng.IntN(50))
					if _, err := p.Apply(t.Context(), topic.Partition(tr.ScopeKey), tr); err != nil {
						t.Fatalf("Apply: %v", err)
					}
					continue
				}
				f, limit := filters[rng.IntN(len(filters))], []int{1, 5, 100}[rng.IntN(3)]
				check(step, f, limit)
				check(step, f, limit) // no transition between: served again
			}
			rm := collect()
			hits := telemetrytest.CounterSum(rm, writer.MetricProjectionListPages, map[string]string{"cache": "hit"})
			misses := telemetrytest.CounterSum(rm, writer.MetricProjectionListPages, map[string]string{"cache": "miss"})
			if hits == 0 || misses == 0 {
				t.Fatalf("pages served again %d, listed %d; want both", hits, misses)
			}
		})
	}
}

// TestListCache_expiredEntityLeavesPage lists an entity that expires a
// second later: a page served again must not show it once it expired,
// though no transition changed the partition.
func TestListCache_expiredEntityLeavesPage(t *testing.T) {
	for _, name := range []string{"miniredis", "redis-server"} {
		t.Run(name, func(t *testing.T) {
			var mr *miniredis.Miniredis
			url := testenv.RedisURL(t)
			if name == "miniredis" {
				mr = miniredis.RunT(t)
				url = "redis://" + mr.Addr()
			}
			yesterday := time.Now().UTC().AddDate(0, 0, -1).Truncate(24 * time.Hour)
			retain := time.Since(yesterday.Add(24*time.Hour)) + time.Second // the entity expires in a second
			p, err := writer.NewProjection(testenv.Dial(t, url), writer.ProjectionConfig{Partitions: partitions, RetainAfterDate: retain}, stream.Telemetry{})
			if err != nil {
				t.Fatal(err)
			}
			cache := p.NewListCache(renderList)
			date := yesterday.Format(time.DateOnly)
			e := avail.Entity{Key: avail.SlotKey("resy", "v1", date, "19:00", 2), Kind: avail.EntitySlot,
				Provider: "resy", Venue: "v1", Date: date, Time: "19:00", PartySize: 2}
			if _, err := p.Apply(t.Context(), 0, transition(e, "open", 1, false)); err != nil {
				t.Fatal(err)
			}
			listed := func() []string {
				b, err := cache.Page(t.Context(), writer.Filter{Venue: "v1"}, "", 10)
				if err != nil {
					t.Fatal(err)
				}
				var page struct{ Items []writer.EntityState }
				if err := json.Unmarshal(b, &page); err != nil {
					t.Fatal(err)
				}
				var keys []string
				for _, it := range page.Items {
					keys = append(keys, it.Key)
				}
				return keys
			}
			if got := listed(); !slices.Equal(got, []string{e.Key}) {
				t.Fatalf("before expiry: %v, want [%s]", got, e.Key)
			}
			if mr != nil {
				mr.FastForward(2 * time.Second) // its keys expire by its clock
			}
			deadline := time.Now().Add(10 * time.Second)
			for len(listed()) != 0 {
				if time.Now().After(deadline) {
					t.Fatalf("the expired entity is still listed 10 s after its expiry")
				}
				time.Sleep(50 * time.Millisecond) // waiting for the clock, not for a goroutine
			}
		})
	}
}
