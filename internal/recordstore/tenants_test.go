package recordstore_test

import (
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/recordstore"
	"github.com/dropstream/dropstream/internal/tenancy"
	"github.com/dropstream/dropstream/internal/testenv"
)

func tenantStore(t *testing.T, rdb redis.UniversalClient, l recordstore.Layout) *recordstore.Store[rec] {
	return newStore(t, rdb, recordstore.Config[rec]{Layout: l, Tenant: func(r rec) string { return r.Tenant }})
}

// Each tenant reads, lists, changes and deletes its own records alone;
// another tenant's id is not found, and stays its first tenant's.
func TestTenants_eachSeesOnlyItsOwnRecords(t *testing.T) {
	each(t, testenv.WithCluster(), func(t *testing.T, rdb redis.UniversalClient, l recordstore.Layout) {
		ctx := t.Context()
		s := tenantStore(t, rdb, l)
		a, b, all := tenancy.View{Tenant: "ta"}, tenancy.View{Tenant: "tb"}, tenancy.View{Tenant: "adm", All: true}
		for _, r := range []rec{{ID: "a1", Tenant: "ta"}, {ID: "b1", Tenant: "tb"}, {ID: "a2", Tenant: "ta"}, {ID: "b2", Tenant: "tb"}, {ID: "a3", Tenant: "ta"}} {
			if err := s.Put(ctx, r.ID, r); err != nil {
				t.Fatal(err)
			}
		}
		// A's pages of one are exact, over A's records alone.
		var walked []rec
		for cursor := ""; ; {
			page, err := s.ListIn(ctx, a, cursor, 1)
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Items) != 1 {
				t.Fatalf("page after %q has %d records, want 1", cursor, len(page.Items))
			}
			walked = append(walked, page.Items...)
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
		if got := ids(walked); got != "a1,a2,a3" {
			t.Errorf("A's walk = %s, want a1,a2,a3", got)
		}
		if page, _ := s.ListIn(ctx, all, "", 10); ids(page.Items) != "a1,a2,a3,b1,b2" {
			t.Errorf("admin's list = %s, want every record", ids(page.Items))
		}
		if _, err := s.GetIn(ctx, b, "a1"); !errors.Is(err, recordstore.ErrNotFound) {
			t.Errorf("B's get of A's record: %v, want ErrNotFound", err)
		}
		if _, err := s.UpdateIn(ctx, b, "a1", func(r *rec) error { r.N = 9; return nil }); !errors.Is(err, recordstore.ErrNotFound) {
			t.Errorf("B's update of A's record: %v, want ErrNotFound", err)
		}
		if err := s.DeleteIn(ctx, b, "a1"); !errors.Is(err, recordstore.ErrNotFound) {
			t.Errorf("B's delete of A's record: %v, want ErrNotFound", err)
		}
		if err := s.Put(ctx, "a1", rec{ID: "a1", N: 7, Tenant: "tb"}); !errors.Is(err, recordstore.ErrTaken) {
			t.Errorf("B's put over A's id: %v, want ErrTaken", err)
		}
		if got, err := s.GetIn(ctx, a, "a1"); err != nil || got.N != 0 || got.Tenant != "ta" {
			t.Errorf("A's record after B's calls = %+v, %v; want it unchanged", got, err)
		}
		if _, err := s.GetIn(ctx, all, "a1"); err != nil {
			t.Errorf("admin's get of A's record: %v", err)
		}
		// Deleted, the id is free for another tenant, which alone lists it.
		if err := s.DeleteIn(ctx, a, "a1"); err != nil {
			t.Fatal(err)
		}
		if err := s.Put(ctx, "a1", rec{ID: "a1", Tenant: "tb"}); err != nil {
			t.Fatalf("B's put of a deleted id: %v", err)
		}
		if page, _ := s.ListIn(ctx, a, "", 10); ids(page.Items) != "a2,a3" {
			t.Errorf("A's list after the move = %s, want a2,a3", ids(page.Items))
		}
		if page, _ := s.ListIn(ctx, b, "", 10); ids(page.Items) != "a1,b1,b2" {
			t.Errorf("B's list after the move = %s, want a1,b1,b2", ids(page.Items))
		}
	})
}

// A record stored before tenants were recorded is the open tenant's: seen
// by a view of all and by the open tenant, not by another, whose put over
// its id is refused.
func TestTenants_recordsWithoutATenantAreTheOpenTenants(t *testing.T) {
	each(t, testenv.WithCluster(), func(t *testing.T, rdb redis.UniversalClient, l recordstore.Layout) {
		ctx := t.Context()
		s := tenantStore(t, rdb, l)
		corrupt(t, rdb, l, "old", `{"id":"old","n":1}`)
		if _, err := s.GetIn(ctx, tenancy.View{Tenant: "ta"}, "old"); !errors.Is(err, recordstore.ErrNotFound) {
			t.Errorf("a tenant's get of an old record: %v, want ErrNotFound", err)
		}
		if _, err := s.GetIn(ctx, tenancy.View{Tenant: tenancy.Open}, "old"); err != nil {
			t.Errorf("the open tenant's get of an old record: %v", err)
		}
		if page, _ := s.ListIn(ctx, tenancy.View{All: true}, "", 10); ids(page.Items) != "old" {
			t.Errorf("admin's list = %s, want the old record", ids(page.Items))
		}
		if err := s.Put(ctx, "old", rec{ID: "old", Tenant: "ta"}); !errors.Is(err, recordstore.ErrTaken) {
			t.Errorf("a tenant's put over an old record: %v, want ErrTaken", err)
		}
		if err := s.DeleteIn(ctx, tenancy.View{Tenant: "ta"}, "old"); !errors.Is(err, recordstore.ErrNotFound) {
			t.Errorf("a tenant's delete of an old record: %v, want ErrNotFound", err)
		}
		if err := s.DeleteIn(ctx, tenancy.View{All: true}, "old"); err != nil {
			t.Errorf("admin's delete of an old record: %v", err)
		}
	})
}
