package offer

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/notifier"

	"github.com/dropstream/dropstream/internal/tenancy"
)

// notices records the notification requests a flow publishes.
type notices struct {
	mu   sync.Mutex
	reqs []notifier.Request
}

func (n *notices) notify(_ context.Context, reqs ...notifier.Request) error {
	for _, r := range reqs {
		if err := r.Validate(); err != nil {
			return err
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.reqs = append(n.reqs, reqs...)
	return nil
}

// windows returns the distinct windows notified per subject.
func (n *notices) windows() map[string][]string {
	n.mu.Lock()
	defer n.mu.Unlock()
	set := map[string]map[string]bool{}
	for _, r := range n.reqs {
		if set[r.Subject] == nil {
			set[r.Subject] = map[string]bool{}
		}
		set[r.Subject][r.Window] = true
	}
	out := map[string][]string{}
	for s, ws := range set {
		out[s] = slices.Sorted(maps.Keys(ws))
	}
	return out
}

func TestPercolate_standingSearchNotifiesOncePerResultChange(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			rdb := b.Client(t)
			var got notices
			cfg := freshConfig(time.Minute)
			cfg.Notify = got.notify
			s := newService(t, rdb, cfg)
			ctx := context.Background()
			offers := SampleOffers(3, 90, 6, s.cfg.Handlers)
			if _, err := s.Catalog().Put(ctx, offers...); err != nil {
				t.Fatal(err)
			}
			// Two keepers: each step is idempotent, so a second copy
			// changes nothing but may publish a notification again — with
			// the same window, which the notifier delivers once.
			runKeeper(t, s)
			runKeeper(t, s)
			ss, err := s.CreateStanding(ctx, "owner-a", StandingRequest{Name: "cheap p1", SubscriberID: "s_0123456789abcdef0123456789ab",
				Filter: productSearch("p1").Filter})
			if err != nil {
				t.Fatal(err)
			}
			version := func(want int64, total int) {
				t.Helper()
				var cur StandingSearch
				waitFor(t, func() bool {
					cur, err = s.GetStanding(ctx, tenancy.View{Tenant: "owner-a"}, ss.ID)
					return err == nil && cur.Version >= want
				})
				if cur.Version != want || cur.Total != total {
					t.Fatalf("standing search at version %d with %d matches, want %d with %d", cur.Version, cur.Total, want, total)
				}
			}
			version(1, len(expected(offers, "p1"))) // the first evaluation tells no one

			steps := []struct {
				name    string
				apply   func() error
				version int64
				total   int
			}{
				{"a new match", func() error {
					o := offers[0]
					o.ID, o.ProductID = "new", "p1"
					_, err := s.Catalog().Put(ctx, o)
					return err
				}, 2, len(expected(offers, "p1")) + 1},
				{"an offer of another product", func() error {
					o := firstOf(offers, "p2")
					o.Quantity++
					_, err := s.Catalog().Put(ctx, o)
					return err
				}, 2, len(expected(offers, "p1")) + 1},
				{"a match deleted", func() error { return s.Catalog().Delete(ctx, "new") }, 3, len(expected(offers, "p1"))},
			}
			for _, st := range steps {
				if err := st.apply(); err != nil {
					t.Fatalf("%s: %v", st.name, err)
				}
				waitCaughtUp(t, s)
				version(st.version, st.total)
			}
			subject := "offer search " + ss.ID
			waitFor(t, func() bool { return len(got.windows()[subject]) == 2 })
			if w := got.windows(); !slices.Equal(w[subject], []string{"v2", "v3"}) || len(w) != 1 {
				t.Fatalf("notified windows %v, want v2 and v3 of %s only", w, subject)
			}
			got.mu.Lock()
			for _, r := range got.reqs {
				if r.SubscriberID != "s_0123456789abcdef0123456789ab" || r.Event != EventSearchChanged || r.Flow != Name {
					t.Errorf("request %+v: want the search's subscriber, event %s", r, EventSearchChanged)
				}
			}
			got.mu.Unlock()
			// The keeper removes a notification from the outbox once it has
			// published it, so the last one may still be there just after
			// it arrived.
			waitFor(t, func() bool { n, err := rdb.ZCard(ctx, standingOutbox).Result(); return err == nil && n == 0 })
		})
	}
}

func TestPercolate_ownersSeeOnlyTheirStandingSearches(t *testing.T) {
	rdb := testenv.Backends()[1].Client(t)
	s := newService(t, rdb, freshConfig(time.Minute))
	ctx := context.Background()
	req := StandingRequest{SubscriberID: "s_0123456789abcdef0123456789ab", Filter: productSearch("p1").Filter}
	a, err := s.CreateStanding(ctx, "a", req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetStanding(ctx, tenancy.View{Tenant: "b"}, a.ID); err != ErrNotFound {
		t.Errorf("get another owner's search = %v, want ErrNotFound", err)
	}
	if err := s.DeleteStanding(ctx, tenancy.View{Tenant: "b"}, a.ID); err != ErrNotFound {
		t.Errorf("delete another owner's search = %v, want ErrNotFound", err)
	}
	if l, err := s.ListStanding(ctx, tenancy.View{Tenant: "b"}); err != nil || len(l) != 0 {
		t.Errorf("list of b = %v, %v; want none", l, err)
	}
	if err := s.DeleteStanding(ctx, tenancy.View{Tenant: "a"}, a.ID); err != nil {
		t.Fatal(err)
	}
	if l, err := s.ListStanding(ctx, tenancy.View{Tenant: "a"}); err != nil || len(l) != 0 {
		t.Errorf("list of a after delete = %v, %v; want none", l, err)
	}
}
