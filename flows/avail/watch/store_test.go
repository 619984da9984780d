package watch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/subscriber"
)

func newStore(t *testing.T, b testenv.Backend, cfg StoreConfig) *Store {
	t.Helper()
	cfg.Logger = quiet
	s, err := NewStore(b.Client(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestWatcherStore_crud(t *testing.T) {
	ctx := context.Background()
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			s := newStore(t, b, StoreConfig{})
			in := validWatcher()
			in.PartySizes = []int{2, 4}
			created, err := s.Create(ctx, in)
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			if !validID(created.ID) || created.CreatedAt.IsZero() {
				t.Errorf("Create gave id %q, created_at %v", created.ID, created.CreatedAt)
			}
			if !strings.HasPrefix(created.Secret, "whsec_") || !subscriber.ValidSecret(created.Secret) {
				t.Errorf("generated secret %q", created.Secret)
			}
			got, err := s.Get(ctx, created.ID)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if got.Secret != "" {
				t.Error("Get returned the secret")
			}
			want := created
			want.Secret = ""
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("Get = %+v, want %+v", got, want)
			}
			given := validWatcher()
			given.Secret = "my-own-secret-0123456789"
			if w, err := s.Create(ctx, given); err != nil || w.Secret != given.Secret {
				t.Errorf("Create with a secret = %q, %v; want the secret kept", w.Secret, err)
			}
			if err := s.Delete(ctx, created.ID); err != nil {
				t.Fatalf("Delete: %v", err)
			}
			if _, err := s.Get(ctx, created.ID); !errors.Is(err, ErrNotFound) {
				t.Errorf("Get after Delete: %v, want ErrNotFound", err)
			}
			if err := s.Delete(ctx, created.ID); !errors.Is(err, ErrNotFound) {
				t.Errorf("Delete twice: %v, want ErrNotFound", err)
			}
			for _, bad := range []string{"", "nope", "w_" + strings.Repeat("Z", 28)} {
				if _, err := s.Get(ctx, bad); !errors.Is(err, ErrInvalidWatcher) {
					t.Errorf("Get(%q): %v, want ErrInvalidWatcher", bad, err)
				}
			}
			invalid := validWatcher()
			invalid.Channel = "pigeon"
			if _, err := s.Create(ctx, invalid); !errors.Is(err, ErrInvalidWatcher) {
				t.Errorf("Create invalid: %v, want ErrInvalidWatcher", err)
			}
		})
	}
}

func TestWatcherStore_limit(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, testenv.Backends()[0], StoreConfig{MaxWatchers: 2})
	for i := range 2 {
		if _, err := s.Create(ctx, validWatcher()); err != nil {
			t.Fatalf("Create %d: %v", i, err)
		}
	}
	if _, err := s.Create(ctx, validWatcher()); !errors.Is(err, ErrTooManyWatchers) {
		t.Errorf("third Create: %v, want ErrTooManyWatchers", err)
	}
}

func TestWatcherStore_paging(t *testing.T) {
	ctx := context.Background()
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			s := newStore(t, b, StoreConfig{})
			var ids []string
			for i := range 7 {
				w := validWatcher()
				w.Name = fmt.Sprintf("watcher %d", i)
				created, err := s.Create(ctx, w)
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, created.ID)
			}
			slices.Sort(ids)
			if err := s.Delete(ctx, ids[3]); err != nil {
				t.Fatal(err)
			}
			want := slices.Delete(slices.Clone(ids), 3, 4)
			var got []string
			cursor, pages := "", 0
			for {
				page, next, err := s.List(ctx, cursor, 2)
				if err != nil {
					t.Fatalf("List(%q): %v", cursor, err)
				}
				pages++
				for _, w := range page {
					if w.Secret != "" {
						t.Error("List returned a secret")
					}
					got = append(got, w.ID)
				}
				if next == "" {
					break
				}
				if len(page) != 2 {
					t.Errorf("page of %d with a next cursor", len(page))
				}
				cursor = next
			}
			if !slices.Equal(got, want) || pages != 3 {
				t.Errorf("listed %v in %d pages, want %v in 3", got, pages, want)
			}
			all, next, err := s.List(ctx, "", 0)
			if err != nil || len(all) != 6 || next != "" {
				t.Errorf("List default limit: %d watchers, next %q, %v", len(all), next, err)
			}
			if _, _, err := s.List(ctx, "bogus", 10); !errors.Is(err, ErrInvalidWatcher) {
				t.Errorf("List with a bad cursor: %v, want ErrInvalidWatcher", err)
			}
		})
	}
}

func TestWatcherStore_match(t *testing.T) {
	ctx := context.Background()
	target := slot("v1", "2025-07-04", "19:00", 2)
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			s := newStore(t, b, StoreConfig{})
			create := func(edit func(*Watcher)) string {
				t.Helper()
				w := Watcher{Name: "w", Channel: notifier.ChannelLog}
				edit(&w)
				created, err := s.Create(ctx, w)
				if err != nil {
					t.Fatalf("Create: %v", err)
				}
				return created.ID
			}
			matching := map[string]string{
				"venue":       create(func(w *Watcher) { w.Provider, w.Venue = "resy", "v1" }),
				"slot":        create(func(w *Watcher) { w.Slot = target.Key }),
				"provider":    create(func(w *Watcher) { w.Provider = "resy" }),
				"in range":    create(func(w *Watcher) { w.Provider, w.Venue, w.DateFrom, w.DateTo = "resy", "v1", "2025-07-01", "2025-07-04" }),
				"open range":  create(func(w *Watcher) { w.Provider, w.DateFrom = "resy", "2025-07-04" }),
				"party 2":     create(func(w *Watcher) { w.Provider, w.Venue, w.PartySizes = "resy", "v1", []int{4, 2} }),
				"all filters": create(func(w *Watcher) { w.Slot, w.DateTo, w.PartySizes = target.Key, "2025-07-04", []int{2} }),
			}
			others := []string{
				create(func(w *Watcher) { w.Provider, w.Venue = "resy", "v2" }),
				create(func(w *Watcher) { w.Slot = avail.SlotKey("resy", "v1", "2025-07-04", "20:00", 2) }),
				create(func(w *Watcher) { w.Provider = "tock" }),
				create(func(w *Watcher) { w.Provider, w.Venue = "tock", "v1" }),
				create(func(w *Watcher) { w.Provider, w.DateFrom = "resy", "2025-07-05" }),
				create(func(w *Watcher) { w.Provider, w.DateTo = "resy", "2025-07-03" }),
				create(func(w *Watcher) { w.Provider, w.Venue, w.PartySizes = "resy", "v1", []int{4} }),
			}
			check := func(e avail.Entity, want []string) {
				t.Helper()
				got, err := s.Match(ctx, e)
				if err != nil {
					t.Fatalf("Match: %v", err)
				}
				var gotIDs []string
				for _, w := range got {
					gotIDs = append(gotIDs, w.ID)
					if w.Secret == "" {
						t.Errorf("Match returned watcher %s without its secret", w.ID)
					}
				}
				slices.Sort(want)
				if !slices.Equal(gotIDs, want) {
					t.Errorf("Match(%s) = %v, want %v (others %v)", e.Key, gotIDs, want, others)
				}
			}
			var want []string
			for _, id := range matching {
				want = append(want, id)
			}
			check(target, want)
			// A close carries only its key's parts: the same watchers match.
			check(avail.Entity{Key: target.Key}, want)

			if err := s.Delete(ctx, matching["venue"]); err != nil {
				t.Fatal(err)
			}
			if err := s.Delete(ctx, matching["slot"]); err != nil {
				t.Fatal(err)
			}
			want = want[:0]
			for name, id := range matching {
				if name != "venue" && name != "slot" {
					want = append(want, id)
				}
			}
			check(target, want)
			check(avail.Entity{Key: avail.SourceKey("s1"), Kind: avail.EntitySource}, nil)
		})
	}
}

func TestWatcherStore_listPagesAreExactPastUnreadableWatchers(t *testing.T) {
	ctx := context.Background()
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			rdb := b.Client(t)
			s, err := NewStore(rdb, StoreConfig{Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for range 7 {
				w, err := s.Create(ctx, validWatcher())
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, w.ID)
			}
			if err := rdb.Set(ctx, watcherKey(ids[1]), "{not json", 0).Err(); err != nil {
				t.Fatal(err)
			}
			want := append(append([]string{}, ids[:1]...), ids[2:]...)
			slices.Sort(want) // ids made in one millisecond sort by their random part
			var got []string
			cursor := ""
			for page := 0; ; page++ {
				ws, next, err := s.List(ctx, cursor, 2)
				if err != nil {
					t.Fatal(err)
				}
				if next != "" && len(ws) != 2 {
					t.Fatalf("page %d has %d watchers, want exactly 2", page, len(ws))
				}
				for _, w := range ws {
					got = append(got, w.ID)
				}
				if next == "" {
					break
				}
				cursor = next
			}
			if !slices.Equal(got, want) {
				t.Fatalf("listed %v, want %v (each readable watcher once)", got, want)
			}
		})
	}
}
