package subscriber

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/tenancy"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

func backends() map[string]func(t *testing.T) redis.UniversalClient {
	return map[string]func(t *testing.T) redis.UniversalClient{
		"miniredis":    func(t *testing.T) redis.UniversalClient { return dial(t, "redis://"+miniredis.RunT(t).Addr()) },
		"redis-server": func(t *testing.T) redis.UniversalClient { return dial(t, testenv.RedisURL(t)) },
	}
}

func dial(t testing.TB, url string) redis.UniversalClient {
	t.Helper()
	rdb, err := stream.Dial(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func newStore(t testing.TB, rdb redis.UniversalClient, now *time.Time) *Store {
	t.Helper()
	st, err := NewStore(rdb, StoreConfig{ConfirmTTL: time.Hour, Now: func() time.Time { return *now }})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func alice() Subscriber {
	return Subscriber{Name: "Alice", TimeZone: "Europe/Paris", Destinations: []Destination{
		{Kind: KindEmail, Address: "Alice@Example.COM"},
		{Kind: KindWebhook, Address: "https://hooks.example.com:443/a/"},
	}}
}

func TestStore_lifecycle(t *testing.T) {
	for name, client := range backends() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
			st := newStore(t, client(t), &now)
			c, err := st.Create(ctx, alice())
			if err != nil {
				t.Fatal(err)
			}
			s := c.Subscriber
			if len(c.ConfirmTokens) != 2 || s.Destinations[1].Secret == "" || s.Destinations[0].Status != StatusPending {
				t.Fatalf("created %+v tokens %v", s, c.ConfirmTokens)
			}
			// The same address, spelled otherwise, is the same core.
			dup := Subscriber{Name: "Mallory", Destinations: []Destination{{Kind: KindEmail, Address: "alice@example.com"}}}
			if _, err := st.Create(ctx, dup); !errors.Is(err, ErrDuplicate) {
				t.Fatalf("duplicate email: %v, want ErrDuplicate", err)
			}
			dupURL := Subscriber{Name: "Mallory", Destinations: []Destination{{Kind: KindSlack, Address: "HTTPS://HOOKS.example.com/a"}}}
			if _, err := st.Create(ctx, dupURL); !errors.Is(err, ErrDuplicate) {
				t.Fatalf("duplicate url: %v, want ErrDuplicate", err)
			}
			// Peek does not confirm (a GET of the link).
			emailID := s.Destinations[0].ID
			info, err := st.Peek(ctx, c.ConfirmTokens[emailID])
			if err != nil || info.Purpose != PurposeConfirm || info.Destination.ID != emailID || info.Destination.Status != StatusPending {
				t.Fatalf("peek = %+v, %v", info, err)
			}
			got, d, err := st.Confirm(ctx, c.ConfirmTokens[emailID])
			if err != nil || d.Status != StatusActive || d.UnsubscribeToken == "" {
				t.Fatalf("confirm = %+v, %v", d, err)
			}
			if _, _, err := st.Confirm(ctx, c.ConfirmTokens[emailID]); !errors.Is(err, ErrTokenNotFound) {
				t.Fatalf("second confirm: %v, want ErrTokenNotFound", err)
			}
			pub, err := st.Get(ctx, s.ID)
			if err != nil || pub.Destinations[0].Status != StatusActive || pub.Destinations[0].UnsubscribeToken != "" || pub.Destinations[1].Secret != "" {
				t.Fatalf("get = %+v, %v", pub, err)
			}
			// The webhook is never confirmed: it expires, the email stays.
			now = now.Add(2 * time.Hour)
			n, err := st.ExpireUnconfirmed(ctx, now, 100)
			if err != nil || n != 1 {
				t.Fatalf("expire = %d, %v; want 1", n, err)
			}
			if _, err := st.Create(ctx, dupURL); err != nil {
				t.Fatalf("the expired core is free again: %v", err)
			}
			// Unsubscribe removes the last destination and the subscriber.
			_, removed, err := st.Unsubscribe(ctx, got.Destinations[0].UnsubscribeToken)
			if err != nil || removed.ID != emailID {
				t.Fatalf("unsubscribe = %+v, %v", removed, err)
			}
			if _, err := st.Get(ctx, s.ID); !errors.Is(err, ErrNotFound) {
				t.Fatalf("get after unsubscribe: %v", err)
			}
			if _, _, err := st.Unsubscribe(ctx, got.Destinations[0].UnsubscribeToken); !errors.Is(err, ErrTokenNotFound) {
				t.Fatalf("second unsubscribe: %v", err)
			}
			if _, err := st.Create(ctx, dup); err != nil {
				t.Fatalf("the unsubscribed core is free again: %v", err)
			}
			list, next, err := st.List(ctx, "", 10)
			if err != nil || len(list) != 2 || next != "" {
				t.Fatalf("list = %d items, next %q, %v", len(list), next, err)
			}
		})
	}
}

// TestStore_destinationIsUniquePerTenant subscribes one address as
// several tenants: within a tenant it is a duplicate (and the error names
// the destination, not who holds it); another tenant subscribes it as
// its own, and a delete frees it for its tenant alone.
func TestStore_destinationIsUniquePerTenant(t *testing.T) {
	for name, client := range backends() {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
			st := newStore(t, client(t), &now)
			ids := map[string]string{}
			for _, step := range []struct {
				tenant, address string
				wantErr         error
			}{
				{"acme", "Reader@Example.org", nil},
				{"acme", "reader@example.org", ErrDuplicate},
				{"globex", "reader@example.org", nil},
				{"globex", "READER@example.org", ErrDuplicate},
				{"", "reader@example.org", nil}, // tenancy.Open
				{"open", "reader@example.org", ErrDuplicate},
				{"key:0123456789abcdef", "reader@example.org", nil},
			} {
				s := Subscriber{Name: "Reader", Tenant: step.tenant, Destinations: []Destination{{Kind: KindEmail, Address: step.address}}}
				c, err := st.Create(ctx, s)
				if !errors.Is(err, step.wantErr) {
					t.Fatalf("%q subscribes %s = %v, want %v", step.tenant, step.address, err, step.wantErr)
				}
				if err != nil && (strings.Contains(err.Error(), "acme") || strings.Contains(err.Error(), ids["acme"])) {
					t.Errorf("the duplicate's error names who holds it: %v", err)
				}
				if err == nil {
					ids[step.tenant] = c.Subscriber.ID
				}
			}
			if err := st.DeleteIn(ctx, tenancy.View{Tenant: "globex"}, ids["globex"]); err != nil {
				t.Fatal(err)
			}
			again := func(tenant string) error {
				_, err := st.Create(ctx, Subscriber{Name: "Reader", Tenant: tenant, Destinations: []Destination{{Kind: KindEmail, Address: "reader@example.org"}}})
				return err
			}
			if err := again("globex"); err != nil {
				t.Errorf("globex after its delete: %v", err)
			}
			if err := again("acme"); !errors.Is(err, ErrDuplicate) {
				t.Errorf("acme after globex's delete = %v, want ErrDuplicate", err)
			}
		})
	}
}

func TestStore_invalidInput(t *testing.T) {
	now := time.Now()
	st := newStore(t, dial(t, "redis://"+miniredis.RunT(t).Addr()), &now)
	cases := map[string]Subscriber{
		"no destination":  {Name: "x"},
		"bad email":       {Name: "x", Destinations: []Destination{{Kind: KindEmail, Address: "Bob <bob@example.com>"}}},
		"ftp url":         {Name: "x", Destinations: []Destination{{Kind: KindWebhook, Address: "ftp://example.com"}}},
		"unknown kind":    {Name: "x", Destinations: []Destination{{Kind: "pigeon", Address: "x"}}},
		"twice":           {Name: "x", Destinations: []Destination{{Kind: KindEmail, Address: "a@b.co"}, {Kind: KindEmail, Address: "A@B.CO"}}},
		"bad zone":        {Name: "x", TimeZone: "Mars/Olympus", Destinations: []Destination{{Kind: KindEmail, Address: "a@b.co"}}},
		"bad quiet hours": {Name: "x", Preferences: Preferences{QuietHours: &QuietHours{Start: "25:00", End: "07:00"}}, Destinations: []Destination{{Kind: KindEmail, Address: "a@b.co"}}},
	}
	for name, s := range cases {
		if _, err := st.Create(context.Background(), s); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := st.Peek(context.Background(), "nope"); !errors.Is(err, ErrTokenNotFound) {
		t.Errorf("peek of a malformed token: %v", err)
	}
}

func TestStore_listPagesExactlyAndSkipsUnreadableRecords(t *testing.T) {
	for name, client := range backends() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
			rdb := client(t)
			st := newStore(t, rdb, &now)
			var ids []string
			for i := range 5 {
				c, err := st.Create(ctx, Subscriber{Name: "s", TimeZone: "UTC",
					Destinations: []Destination{{Kind: KindEmail, Address: "s" + string(rune('a'+i)) + "@example.com"}}})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, c.Subscriber.ID)
				now = now.Add(time.Millisecond)
			}
			// One record is overwritten with what no subscriber decodes from.
			if err := rdb.Set(ctx, subKey(ids[2]), "{not json", 0).Err(); err != nil {
				t.Fatal(err)
			}
			var got []string
			cursor := ""
			for pages := 0; ; pages++ {
				subs, next, err := st.List(ctx, cursor, 2)
				if err != nil {
					t.Fatal(err)
				}
				if next != "" && len(subs) != 2 {
					t.Fatalf("page %d holds %d subscribers with a next cursor, want exactly 2", pages, len(subs))
				}
				for _, s := range subs {
					got = append(got, s.ID)
				}
				if cursor = next; cursor == "" || pages > 5 {
					break
				}
			}
			want := []string{ids[0], ids[1], ids[3], ids[4]}
			if !slices.Equal(got, want) {
				t.Errorf("listed %v, want %v (every readable subscriber once, in id order)", got, want)
			}
			if _, err := st.SetPreferences(ctx, ids[2], "UTC", Preferences{}); err == nil {
				t.Error("preferences of an unreadable record: nil error, want one")
			}
			if _, err := st.SetPreferences(ctx, "s_000000000000deadbeefdeadbeef", "UTC", Preferences{}); !errors.Is(err, ErrNotFound) {
				t.Errorf("preferences of an unknown subscriber: %v, want ErrNotFound", err)
			}
		})
	}
}

// SetPreferences is SetPreferencesIn of any tenant's subscriber.
func (st *Store) SetPreferences(ctx context.Context, id, timeZone string, p Preferences) (Subscriber, error) {
	return st.SetPreferencesIn(ctx, tenancy.View{All: true}, id, timeZone, p)
}
