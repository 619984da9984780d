package recordstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/recordstore"
	"github.com/dropstream/dropstream/internal/testenv"
)

type rec struct {
	ID     string `json:"id"`
	N      int    `json:"n"`
	Tenant string `json:"tenant,omitempty"`
}

// layouts are the two layouts under one hash tag, so that the Prefix and
// Index of the keys layout share a cluster slot.
var layouts = []struct {
	name   string
	layout recordstore.Layout
}{
	{"hash", recordstore.Layout{Hash: "ds:{t}:recs"}},
	{"keys", recordstore.Layout{Prefix: "ds:{t}:rec:", Index: "ds:{t}:recs"}},
}

// each runs fn for every layout on every backend.
func each(t *testing.T, backends []testenv.Backend, fn func(t *testing.T, rdb redis.UniversalClient, l recordstore.Layout)) {
	for _, b := range backends {
		for _, l := range layouts {
			t.Run(b.Name+"/"+l.name, func(t *testing.T) { fn(t, b.Client(t), l.layout) })
		}
	}
}

func newStore(t *testing.T, rdb redis.UniversalClient, cfg recordstore.Config[rec]) *recordstore.Store[rec] {
	t.Helper()
	s, err := recordstore.New(rdb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func put(t *testing.T, s *recordstore.Store[rec], ids ...string) {
	t.Helper()
	for _, id := range ids {
		if err := s.Put(context.Background(), id, rec{ID: id}); err != nil {
			t.Fatalf("Put %s: %v", id, err)
		}
	}
}

// corrupt stores raw as the record of id, as something else might.
func corrupt(t *testing.T, rdb redis.UniversalClient, l recordstore.Layout, id, raw string) {
	t.Helper()
	ctx := context.Background()
	var err error
	if l.Hash != "" {
		err = rdb.HSet(ctx, l.Hash, id, raw).Err()
	} else {
		err = rdb.Set(ctx, l.Prefix+id, raw, 0).Err()
		if err == nil {
			err = rdb.ZAdd(ctx, l.Index, redis.Z{Member: id}).Err()
		}
	}
	if err != nil {
		t.Fatal(err)
	}
}

func ids(recs []rec) string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return strings.Join(out, ",")
}

func TestStore_putGetDelete(t *testing.T) {
	each(t, testenv.Backends(), func(t *testing.T, rdb redis.UniversalClient, l recordstore.Layout) {
		ctx := context.Background()
		s := newStore(t, rdb, recordstore.Config[rec]{Layout: l})
		if err := s.Put(ctx, "a", rec{ID: "a", N: 1}); err != nil {
			t.Fatal(err)
		}
		if err := s.Put(ctx, "a", rec{ID: "a", N: 2}); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Get(ctx, "a"); err != nil || got != (rec{ID: "a", N: 2}) {
			t.Fatalf("Get = %+v, %v; want the replaced record", got, err)
		}
		if n, err := s.Len(ctx); err != nil || n != 1 {
			t.Fatalf("Len = %d, %v; want 1", n, err)
		}
		if err := s.Delete(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		for name, err := range map[string]error{
			"Get":    func() error { _, err := s.Get(ctx, "a"); return err }(),
			"Delete": s.Delete(ctx, "a"),
			"Update": func() error { _, err := s.Update(ctx, "a", func(*rec) error { return nil }); return err }(),
		} {
			if !errors.Is(err, recordstore.ErrNotFound) {
				t.Errorf("%s of a deleted record = %v, want ErrNotFound", name, err)
			}
		}
		if n, err := s.Len(ctx); err != nil || n != 0 {
			t.Fatalf("Len after Delete = %d, %v; want 0", n, err)
		}
	})
}

func TestStore_boundsRecordsAndSize(t *testing.T) {
	each(t, testenv.Backends(), func(t *testing.T, rdb redis.UniversalClient, l recordstore.Layout) {
		ctx := context.Background()
		s := newStore(t, rdb, recordstore.Config[rec]{Layout: l, Max: 2, MaxSize: 40})
		put(t, s, "a", "b")
		if err := s.Put(ctx, "c", rec{ID: "c"}); !errors.Is(err, recordstore.ErrFull) {
			t.Errorf("Put beyond Max = %v, want ErrFull", err)
		}
		if err := s.Put(ctx, "b", rec{ID: "b", N: 1}); err != nil {
			t.Errorf("replacing a record of a full store: %v", err)
		}
		if err := s.Put(ctx, "a", rec{ID: strings.Repeat("x", 40)}); !errors.Is(err, recordstore.ErrTooLarge) {
			t.Errorf("Put of a large record = %v, want ErrTooLarge", err)
		}
		if _, err := s.Update(ctx, "a", func(r *rec) error { r.ID = strings.Repeat("x", 40); return nil }); !errors.Is(err, recordstore.ErrTooLarge) {
			t.Errorf("Update to a large record = %v, want ErrTooLarge", err)
		}
		if all, err := s.All(ctx); err != nil || ids(all) != "a,b" {
			t.Errorf("All = %s, %v; want a,b unchanged", ids(all), err)
		}
	})
}

func TestList_pagesExactly(t *testing.T) {
	each(t, testenv.WithCluster(), func(t *testing.T, rdb redis.UniversalClient, l recordstore.Layout) {
		ctx := context.Background()
		s := newStore(t, rdb, recordstore.Config[rec]{Layout: l})
		put(t, s, "g", "b", "e", "a", "c", "f", "d")
		for _, tc := range []struct {
			limit int
			pages []string
		}{
			{1, []string{"a", "b", "c", "d", "e", "f", "g"}},
			{3, []string{"a,b,c", "d,e,f", "g"}},
			{6, []string{"a,b,c,d,e,f", "g"}},
			{7, []string{"a,b,c,d,e,f,g"}},
			{100, []string{"a,b,c,d,e,f,g"}},
		} {
			var got []string
			cursor := ""
			for range 10 {
				page, err := s.List(ctx, cursor, tc.limit)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, ids(page.Items))
				if page.NextCursor == "" {
					break
				}
				cursor = page.NextCursor
			}
			if strings.Join(got, "|") != strings.Join(tc.pages, "|") {
				t.Errorf("limit %d: pages %q, want %q", tc.limit, got, tc.pages)
			}
		}
		if page, err := s.List(ctx, "zz", 3); err != nil || len(page.Items) != 0 || page.NextCursor != "" {
			t.Errorf("List after the last id = %+v, %v; want an empty last page", page, err)
		}
		if page, err := s.List(ctx, "bb", 2); err != nil || ids(page.Items) != "c,d" || page.NextCursor != "d" {
			t.Errorf("List after an absent id = %+v, %v; want c,d then d", page, err)
		}
		if _, err := s.List(ctx, "", 0); err == nil {
			t.Error("List with limit 0 succeeded")
		}
	})
}

func TestList_fillsThePagePastUnreadableRecords(t *testing.T) {
	each(t, testenv.Backends(), func(t *testing.T, rdb redis.UniversalClient, l recordstore.Layout) {
		ctx := context.Background()
		s := newStore(t, rdb, recordstore.Config[rec]{Layout: l})
		put(t, s, "a", "d", "e", "f")
		corrupt(t, rdb, l, "b", "{not json")
		corrupt(t, rdb, l, "c", "[]")
		page, err := s.List(ctx, "", 3)
		if ids(page.Items) != "a,d,e" || page.NextCursor != "e" {
			t.Errorf("page %s next %q, want a,d,e next e", ids(page.Items), page.NextCursor)
		}
		if !errors.Is(err, recordstore.ErrCorrupt) || !strings.Contains(err.Error(), `"b"`) || !strings.Contains(err.Error(), `"c"`) {
			t.Errorf("List error %v, want ErrCorrupt naming b and c", err)
		}
		all, err := s.All(ctx)
		if ids(all) != "a,d,e,f" || !errors.Is(err, recordstore.ErrCorrupt) {
			t.Errorf("All = %s, %v; want a,d,e,f and ErrCorrupt", ids(all), err)
		}
		// A custom Decode's errors come back as they are.
		errBad := errors.New("bad record")
		strict := newStore(t, rdb, recordstore.Config[rec]{Layout: l, Decode: func(id string, raw []byte) (rec, error) {
			if id == "d" {
				return rec{}, fmt.Errorf("%w %s", errBad, id)
			}
			return rec{ID: id}, nil
		}})
		page, err = strict.List(ctx, "a", 2)
		if ids(page.Items) != "b,c" || page.NextCursor != "c" || err != nil {
			t.Errorf("strict page %s next %q (%v), want b,c next c", ids(page.Items), page.NextCursor, err)
		}
		page, err = strict.List(ctx, "c", 2)
		if ids(page.Items) != "e,f" || page.NextCursor != "" || !errors.Is(err, errBad) {
			t.Errorf("strict page %s next %q (%v), want e,f, last, errBad", ids(page.Items), page.NextCursor, err)
		}
	})
}

func TestUpdate_readModifyWrite(t *testing.T) {
	each(t, testenv.Backends(), func(t *testing.T, rdb redis.UniversalClient, l recordstore.Layout) {
		ctx := context.Background()
		s := newStore(t, rdb, recordstore.Config[rec]{Layout: l})
		put(t, s, "a", "b")
		const writers = 8
		var wg sync.WaitGroup
		for range writers {
			wg.Go(func() {
				if _, err := s.Update(ctx, "a", func(r *rec) error { r.N++; return nil }); err != nil {
					t.Errorf("Update: %v", err)
				}
			})
		}
		wg.Wait()
		if got, err := s.Get(ctx, "a"); err != nil || got.N != writers {
			t.Fatalf("after %d concurrent increments: %+v, %v", writers, got, err)
		}
		errStop := errors.New("stop")
		if _, err := s.Update(ctx, "b", func(r *rec) error { r.N = 99; return errStop }); !errors.Is(err, errStop) {
			t.Fatalf("Update with a failing fn = %v, want its error", err)
		}
		if got, _ := s.Get(ctx, "b"); got.N != 0 {
			t.Fatalf("a failed Update wrote %+v", got)
		}
		got, err := s.Update(ctx, "b", func(r *rec) error { r.N = 7; return nil })
		if err != nil || got != (rec{ID: "b", N: 7}) {
			t.Fatalf("Update = %+v, %v; want the record written", got, err)
		}
	})
}

func TestNew_checksTheLayout(t *testing.T) {
	rdb := testenv.Backends()[0].Client(t)
	for _, tc := range []struct {
		name string
		cfg  recordstore.Config[rec]
		ok   bool
	}{
		{"hash", recordstore.Config[rec]{Layout: recordstore.Layout{Hash: "h"}}, true},
		{"keys", recordstore.Config[rec]{Layout: recordstore.Layout{Prefix: "p:", Index: "i"}}, true},
		{"none", recordstore.Config[rec]{}, false},
		{"prefix without index", recordstore.Config[rec]{Layout: recordstore.Layout{Prefix: "p:"}}, false},
		{"both", recordstore.Config[rec]{Layout: recordstore.Layout{Hash: "h", Prefix: "p:", Index: "i"}}, false},
		{"negative max", recordstore.Config[rec]{Layout: recordstore.Layout{Hash: "h"}, Max: -1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := recordstore.New(rdb, tc.cfg); (err == nil) != tc.ok {
				t.Fatalf("New = %v, want ok %t", err, tc.ok)
			}
		})
	}
}
