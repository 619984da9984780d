package collector_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dropstream/dropstream/collector"
	"github.com/dropstream/dropstream/collector/simulator"
	"github.com/dropstream/dropstream/internal/tenancy"
)

func TestStore_putGetListDelete(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	store := collector.NewStore(rdb)
	a, b := validSource(), validSource()
	b.ID, b.AuthToken = "b", "tok"
	for _, s := range []collector.Source{b, a} {
		if err := store.Put(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	got, err := store.Get(ctx, "b")
	if err != nil || got.Fingerprint() != b.Fingerprint() || got.Interval != collector.DefaultInterval {
		t.Errorf("Get = %+v, %v; want b with defaults", got, err)
	}
	list, err := store.List(ctx)
	if err != nil || len(list) != 2 || list[0].ID != "b" || list[1].ID != a.ID {
		t.Errorf("List = %+v, %v; want b and %s sorted", list, err, a.ID)
	}
	if n, _ := rdb.HLen(ctx, collector.SourcesKey).Result(); n != 2 {
		t.Errorf("hash %s holds %d entries, want 2", collector.SourcesKey, n)
	}
	if err := store.Delete(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Get(ctx, "b"); !errors.Is(err, collector.ErrSourceNotFound) {
		t.Errorf("Get after Delete = %v, want ErrSourceNotFound", err)
	}
	if err := store.Delete(ctx, "b"); !errors.Is(err, collector.ErrSourceNotFound) {
		t.Errorf("Delete twice = %v, want ErrSourceNotFound", err)
	}
}

func TestStore_putRejectsInvalidSources(t *testing.T) {
	store := collector.NewStore(newRedis(t))
	bad := validSource()
	bad.BaseURL = "gopher://x"
	if err := store.Put(context.Background(), bad); !errors.Is(err, collector.ErrInvalidSource) {
		t.Errorf("Put = %v, want ErrInvalidSource", err)
	}
}

func TestStore_listSkipsAndReportsCorruptEntries(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	store := collector.NewStore(rdb)
	if err := store.Put(ctx, validSource()); err != nil {
		t.Fatal(err)
	}
	rdb.HSet(ctx, collector.SourcesKey, "garbage", "{not json")
	rdb.HSet(ctx, collector.SourcesKey, "wrong-id", `{"id":"other","provider":"resy","base_url":"http://x","scopes":[{"date":"2026-11-21","party_size":2}]}`)
	rdb.HSet(ctx, collector.SourcesKey, "invalid", `{"id":"invalid","provider":"resy","base_url":"http://x","scopes":[]}`)
	list, err := store.List(ctx)
	if len(list) != 1 || list[0].ID != validSource().ID {
		t.Errorf("List kept %+v, want the one valid source", list)
	}
	if !errors.Is(err, collector.ErrInvalidSource) {
		t.Fatalf("List error %v, want ErrInvalidSource", err)
	}
	for _, id := range []string{"garbage", "wrong-id", "invalid"} {
		if !strings.Contains(err.Error(), id) {
			t.Errorf("List error %q does not name %q", err, id)
		}
	}
}

func TestLoadFile_readsAndValidatesAnArrayOfSources(t *testing.T) {
	valid := `[{"id":"a","provider":"resy","base_url":"http://127.0.0.1:9/","interval":"2m",
		"scopes":[{"venue":"1001","date":"2026-11-21","party_size":2}]},
		{"id":"b","provider":"opentable","base_url":"https://ot.example","restaurant_level":true,
		"scopes":[{"date":"2026-11-21","party_size":4,"query":"fig"}],"rate_limit":0.5}]`
	tests := []struct {
		name, content, reason string
	}{
		{"valid", valid, ""},
		{"empty array", `[]`, ""},
		{"object", `{"sources":[]}`, "JSON array"},
		{"trailing data", `[] []`, "data after"},
		{"unknown field", `[{"id":"a","provider":"resy","base_url":"http://x","scopes":[{"date":"2026-11-21","party_size":2}],"every":"1m"}]`, "unknown field"},
		{"invalid source", `[{"id":"a","provider":"resy","base_url":"http://x","scopes":[{"date":"2026-11-21","party_size":0}]}]`, "source 0"},
		{"duplicate ids", strings.Replace(valid, `"id":"b"`, `"id":"a"`, 1), "used twice"},
		{"too many", "[" + strings.Repeat(`{},`, collector.MaxSources) + "{}]", "exceed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "sources.json")
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			srcs, err := collector.LoadFile(path)
			if tt.reason == "" {
				if err != nil {
					t.Fatal(err)
				}
				if tt.name == "valid" && (len(srcs) != 2 || srcs[0].Interval.String() != "2m0s" || srcs[1].RateLimit != 0.5 ||
					srcs[1].Stabilization != 2 || !srcs[1].RestaurantLevel) {
					t.Errorf("LoadFile = %+v", srcs)
				}
				return
			}
			if !errors.Is(err, collector.ErrInvalidSource) || !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("LoadFile = %v, want ErrInvalidSource saying %q", err, tt.reason)
			}
		})
	}
	if _, err := collector.LoadFile(filepath.Join(t.TempDir(), "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadFile of a missing file = %v, want os.ErrNotExist", err)
	}
}

func TestCollector_syncFollowsTheStore(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	store := collector.NewStore(rdb)
	e := newEnv(t, simulator.Config{}, collector.CollectorConfig{Store: store})
	for i := range 3 {
		s := validSource()
		s.ID = fmt.Sprintf("s%d", i)
		if err := store.Put(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(e.c.Sources()); n != 3 {
		t.Fatalf("%d sources after Sync, want 3", n)
	}
	if err := store.Delete(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	rdb.HSet(ctx, collector.SourcesKey, "s2", "{corrupt")
	err := e.c.Sync(ctx)
	if !errors.Is(err, collector.ErrInvalidSource) {
		t.Errorf("Sync over a corrupt entry = %v, want ErrInvalidSource", err)
	}
	var ids []string
	for _, s := range e.c.Sources() {
		ids = append(ids, s.ID)
	}
	// With an unreadable entry nothing is removed: s2 stays as it was, and
	// so does s1 until the store reads cleanly again.
	if strings.Join(ids, ",") != "s0,s1,s2" {
		t.Errorf("sources %v after a partial Sync, want s0,s1,s2", ids)
	}
	rdb.HDel(ctx, collector.SourcesKey, "s2")
	if err := e.c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if s := e.c.Sources(); len(s) != 1 || s[0].ID != "s0" {
		t.Errorf("sources %+v after a clean Sync, want s0", s)
	}
}

func TestStore_getWithHealthReadsTheStoredSourceEachTime(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	store := collector.NewStore(rdb)
	src := validSource()
	src.Tenant = "t1"
	if err := store.Put(ctx, src); err != nil {
		t.Fatal(err)
	}
	own := tenancy.View{Tenant: "t1"}
	got, _, polled, err := store.GetWithHealth(ctx, own, src.ID)
	if err != nil || got.Fingerprint() != src.Fingerprint() || polled {
		t.Fatalf("GetWithHealth = %+v, %v, %v; want the source, not polled", got, polled, err)
	}
	got.Scopes[0].Venue = "changed by the caller"
	if again, _, _, err := store.GetWithHealth(ctx, own, src.ID); err != nil || again.Fingerprint() != src.Fingerprint() {
		t.Errorf("GetWithHealth after the caller changed a copy = %+v, %v; want the stored source", again, err)
	}
	src.Scopes = append(src.Scopes, src.Scopes[0])
	src.Scopes[1].PartySize = 4
	if err := store.Put(ctx, src); err != nil {
		t.Fatal(err)
	}
	if got, _, _, err := store.GetWithHealth(ctx, own, src.ID); err != nil || got.Fingerprint() != src.Fingerprint() {
		t.Errorf("GetWithHealth after a Put = %+v, %v; want the new source", got, err)
	}
	for _, v := range []tenancy.View{{Tenant: "t2"}, {}} {
		if _, _, _, err := store.GetWithHealth(ctx, v, src.ID); !errors.Is(err, collector.ErrSourceNotFound) {
			t.Errorf("GetWithHealth of another tenant's source (view %+v) = %v, want ErrSourceNotFound", v, err)
		}
	}
	if _, _, _, err := store.GetWithHealth(ctx, own, "missing"); !errors.Is(err, collector.ErrSourceNotFound) {
		t.Errorf("GetWithHealth of a missing source = %v, want ErrSourceNotFound", err)
	}
	rdb.HSet(ctx, collector.SourcesKey, src.ID, "{not json")
	if _, _, _, err := store.GetWithHealth(ctx, tenancy.View{All: true}, src.ID); !errors.Is(err, collector.ErrInvalidSource) {
		t.Errorf("GetWithHealth of a corrupt source = %v, want ErrInvalidSource", err)
	}
}
