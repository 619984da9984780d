package writer_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer"
)

// listFixture is an entity of the list tests with its expected state.
type listFixture struct {
	e     avail.Entity
	part  int
	state string
}

// seedList applies opens for 49 entities over two providers, three venues,
// two dates, two times and two party sizes (plus one restaurant-level
// entity), and closes every third one.
func seedList(t *testing.T, p *writer.Projection) []listFixture {
	t.Helper()
	topic := avail.NewTopics(partitions).Transitions
	var out []listFixture
	add := func(e avail.Entity) {
		scope := "src-" + e.Provider + "|" + e.Venue + "|" + e.Date + "|" + fmt.Sprint(e.PartySize) + "|"
		part := topic.Partition(scope)
		tr := transition(e, "open", 1, false)
		tr.ScopeKey = scope
		if _, err := p.Apply(t.Context(), part, tr); err != nil {
			t.Fatalf("Apply: %v", err)
		}
		f := listFixture{e: e, part: part, state: writer.StateOpen}
		if len(out)%3 == 0 {
			tr = transition(e, "close", 2, false)
			tr.ScopeKey = scope
			if _, err := p.Apply(t.Context(), part, tr); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			f.state = writer.StateClosed
		}
		out = append(out, f)
	}
	for _, e := range slots([]string{"resy", "opentable"}, []string{"v1", "v2", "v3"}) {
		add(e)
	}
	add(avail.Entity{Key: avail.RestaurantKey("resy", "v1", "2099-03-08", 2), Kind: avail.EntityRestaurant,
		Provider: "resy", Venue: "v1", Date: "2099-03-08", PartySize: 2})
	return out
}

func TestProjection_listFiltersAndPages(t *testing.T) {
	tests := []struct {
		name    string
		f       writer.Filter
		maxScan int // 0: default; small values allow short pages
	}{
		{name: "everything"},
		{name: "open", f: writer.Filter{State: writer.StateOpen}},
		{name: "closed", f: writer.Filter{State: writer.StateClosed}},
		{name: "provider", f: writer.Filter{Provider: "resy"}},
		{name: "provider and venue", f: writer.Filter{Provider: "opentable", Venue: "v2"}},
		{name: "provider venue and date", f: writer.Filter{Provider: "resy", Venue: "v1", Date: "2099-03-08"}},
		{name: "venue alone", f: writer.Filter{Venue: "v3"}},
		{name: "date alone", f: writer.Filter{Date: "2099-03-09"}},
		{name: "party size", f: writer.Filter{PartySize: 4}},
		{name: "provider party and state", f: writer.Filter{Provider: "resy", PartySize: 2, State: writer.StateClosed}},
		{name: "party size with a small scan budget", f: writer.Filter{PartySize: 2}, maxScan: 5},
		{name: "unknown provider", f: writer.Filter{Provider: "nobody"}},
		{name: "provider prefix of another", f: writer.Filter{Provider: "res"}},
	}
	for _, be := range backends(t) {
		t.Run(be.name, func(t *testing.T) {
			seeded := seedList(t, newProjection(t, be.rdb, 0))
			for _, tt := range tests {
				var want []string
				for _, s := range seeded {
					f := tt.f
					if (f.Provider == "" || s.e.Provider == f.Provider) && (f.Venue == "" || s.e.Venue == f.Venue) &&
						(f.Date == "" || s.e.Date == f.Date) && (f.PartySize == 0 || s.e.PartySize == f.PartySize) &&
						(f.State == "" || s.state == f.State) {
						want = append(want, fmt.Sprintf("%s@%d %s", s.e.Key, s.part, s.state))
					}
				}
				slices.Sort(want)
				p, err := writer.NewProjection(be.rdb, writer.ProjectionConfig{Partitions: partitions, MaxScan: tt.maxScan}, stream.Telemetry{})
				if err != nil {
					t.Fatalf("NewProjection: %v", err)
				}
				for _, limit := range []int{1, 7, 100} {
					t.Run(fmt.Sprintf("%s/limit %d", tt.name, limit), func(t *testing.T) {
						got := listAll(t, p, tt.f, limit, tt.maxScan == 0)
						if !slices.Equal(got, want) {
							t.Fatalf("List pages =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
						}
					})
				}
			}
		})
	}
}

// listAll pages through List and returns "key@partition state" in order.
// With fullPages, every page but the last must hold limit items.
func listAll(t *testing.T, p *writer.Projection, f writer.Filter, limit int, fullPages bool) []string {
	t.Helper()
	return listFrom(t, p, f, "", limit, fullPages)
}

// listFrom is listAll from a cursor.
func listFrom(t *testing.T, p *writer.Projection, f writer.Filter, cursor string, limit int, fullPages bool) []string {
	t.Helper()
	var got []string
	for page := 0; ; page++ {
		if page > 200 {
			t.Fatal("List did not end within 200 pages")
		}
		items, next, err := p.List(t.Context(), f, cursor, limit)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		if len(items) > limit || (fullPages && next != "" && len(items) != limit) {
			t.Fatalf("page %d holds %d items, limit %d, next %q", page, len(items), limit, next)
		}
		for _, it := range items {
			got = append(got, fmt.Sprintf("%s@%d %s", it.Key, it.Partition, it.State))
		}
		if next == "" {
			return got
		}
		cursor = next
	}
}

func TestProjection_listRejectsBadInput(t *testing.T) {
	p := newProjection(t, backends(t)[0].rdb, 0)
	tests := []struct {
		name   string
		f      writer.Filter
		cursor string
		badCur bool
	}{
		{name: "unknown state", f: writer.Filter{State: "ajar"}},
		{name: "pipe in provider", f: writer.Filter{Provider: "a|b"}},
		{name: "negative party", f: writer.Filter{PartySize: -1}},
		{name: "cursor not base64", cursor: "%%%", badCur: true},
		{name: "cursor without key", cursor: "MQ", badCur: true},
		{name: "cursor partition out of range", cursor: "OTl8YQ", badCur: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := p.List(t.Context(), tt.f, tt.cursor, 10)
			if err == nil || tt.badCur != errors.Is(err, writer.ErrBadCursor) {
				t.Fatalf("List = %v, want an error (bad cursor: %v)", err, tt.badCur)
			}
		})
	}
}

// seedVenues applies opens, closing every third, for entities of providers
// that sort around one another ("res" after "resy" by key) over venues
// "v1", "v10" and "v2", the health entities of sources "v1" and "v10", and
// many of provider "aaa" at other venues.
func seedVenues(t *testing.T, p *writer.Projection) map[string]avail.Entity {
	t.Helper()
	topic := avail.NewTopics(partitions).Transitions
	out := map[string]avail.Entity{}
	add := func(e avail.Entity) {
		scope := "src|" + e.Venue + "|" + e.Date + "|" + fmt.Sprint(e.PartySize) + "|" + e.Time
		part := topic.Partition(scope)
		for i, kind := range []string{"open", "close"} {
			if i == 1 && len(out)%3 != 0 {
				break
			}
			tr := transition(e, kind, i+1, false)
			tr.ScopeKey = scope
			if _, err := p.Apply(t.Context(), part, tr); err != nil {
				t.Fatalf("Apply: %v", err)
			}
		}
		out[e.Key] = e
	}
	for _, e := range slots([]string{"resy", "res", "opentable", "simulator", "source"}, []string{"v1", "v10", "v2"}) {
		add(e)
	}
	for _, id := range []string{"v1", "v10"} {
		add(avail.Entity{Key: avail.SourceKey(id), Kind: avail.EntitySource, Venue: id})
	}
	// Enough entities of other venues first that a chunk of the index does
	// not reach the end of any partition.
	var others []string
	for i := range 80 {
		others = append(others, fmt.Sprintf("f%02d", i))
	}
	for _, e := range slots([]string{"aaa"}, others) {
		add(e)
	}
	return out
}

// slots returns the slot entities of providers at venues on two dates, at
// two times, for parties of 2 and 4.
func slots(providers, venues []string) []avail.Entity {
	var out []avail.Entity
	for _, prov := range providers {
		for _, venue := range venues {
			for _, date := range []string{"2099-03-08", "2099-03-09"} {
				for _, hhmm := range []string{"18:00", "19:30"} {
					for _, party := range []int{2, 4} {
						out = append(out, avail.Entity{Key: avail.SlotKey(prov, venue, date, hhmm, party), Kind: avail.EntitySlot,
							Provider: prov, Venue: venue, Date: date, Time: hhmm, PartySize: party})
					}
				}
			}
		}
	}
	return out
}

// TestProjection_listVenueAcrossProviders checks that a venue without a
// provider lists what a whole scan filtered by venue does, page by page
// and from every cursor of the whole scan.
func TestProjection_listVenueAcrossProviders(t *testing.T) {
	tests := []struct {
		name    string
		f       writer.Filter
		maxScan int
	}{
		{name: "venue", f: writer.Filter{Venue: "v1"}},
		{name: "open", f: writer.Filter{Venue: "v1", State: writer.StateOpen}},
		{name: "closed", f: writer.Filter{Venue: "v10", State: writer.StateClosed}},
		{name: "date", f: writer.Filter{Venue: "v1", Date: "2099-03-09"}},
		{name: "party size", f: writer.Filter{Venue: "v2", PartySize: 4, State: writer.StateOpen}},
		{name: "unknown venue", f: writer.Filter{Venue: "v3"}},
		{name: "small scan budget", f: writer.Filter{Venue: "v10"}, maxScan: 3},
	}
	for _, be := range backends(t) {
		t.Run(be.name, func(t *testing.T) {
			base := newProjection(t, be.rdb, 0)
			seeded := seedVenues(t, base)
			for _, tt := range tests {
				p, err := writer.NewProjection(be.rdb, writer.ProjectionConfig{Partitions: partitions, MaxScan: tt.maxScan}, stream.Telemetry{})
				if err != nil {
					t.Fatalf("NewProjection: %v", err)
				}
				matches := func(item string) bool {
					e := seeded[item[:strings.LastIndex(item, "@")]]
					f := tt.f
					return e.Venue == f.Venue && (f.Date == "" || e.Date == f.Date) && (f.PartySize == 0 || e.PartySize == f.PartySize)
				}
				// The whole scan of the state, page by page, and its cursors.
				var whole []string
				cursors := map[int]string{} // by how many items precede them
				for cursor := ""; ; {
					items, next, err := base.List(t.Context(), writer.Filter{State: tt.f.State}, cursor, 37)
					if err != nil {
						t.Fatalf("List: %v", err)
					}
					for _, it := range items {
						whole = append(whole, fmt.Sprintf("%s@%d %s", it.Key, it.Partition, it.State))
					}
					if next == "" {
						break
					}
					cursor, cursors[len(whole)] = next, next
				}
				t.Run(tt.name, func(t *testing.T) {
					want := slices.DeleteFunc(slices.Clone(whole), func(s string) bool { return !matches(s) })
					if tt.f.Venue != "v3" && len(want) == 0 {
						t.Fatal("the seed holds nothing to list")
					}
					for _, limit := range []int{1, 7, 100} {
						if got := listAll(t, p, tt.f, limit, tt.maxScan == 0); !slices.Equal(got, want) {
							t.Fatalf("limit %d: List pages =\n%s\nwant\n%s", limit, strings.Join(got, "\n"), strings.Join(want, "\n"))
						}
					}
					for n, cursor := range cursors {
						want := slices.DeleteFunc(slices.Clone(whole[n:]), func(s string) bool { return !matches(s) })
						if got := listFrom(t, p, tt.f, cursor, 7, tt.maxScan == 0); !slices.Equal(got, want) {
							t.Fatalf("from the cursor after %s: List pages =\n%s\nwant\n%s", whole[n-1], strings.Join(got, "\n"), strings.Join(want, "\n"))
						}
					}
				})
			}
		})
	}
}
