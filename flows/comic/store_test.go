package comic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestStore_duplicateSubscriptionIsRefused(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			ctx := context.Background()
			s, err := NewStore(be.client(t), StoreConfig{})
			if err != nil {
				t.Fatal(err)
			}
			first := mustSubscribe(t, s, "Peter@Example.com", `{"series":"X-Men","publisher":"Marvel"}`)
			// Same email (other case), same body (other order, white space).
			_, err = s.Create(ctx, "peter@example.com", json.RawMessage(`{ "publisher":"Marvel", "series":"X-Men" }`), "")
			if !errors.Is(err, ErrDuplicate) {
				t.Fatalf("duplicate Create = %v, want ErrDuplicate", err)
			}
			// Another body or another email is not a duplicate.
			mustSubscribe(t, s, "peter@example.com", `{"series":"X-Men"}`)
			mustSubscribe(t, s, "mj@example.com", `{"series":"X-Men","publisher":"Marvel"}`)
			subs, err := s.ByEmail(ctx, "PETER@example.com")
			if err != nil || len(subs) != 2 {
				t.Fatalf("ByEmail = %d subscriptions, %v; want 2", len(subs), err)
			}
			if first.Pattern != "publisher,series" || string(first.Body) != `{"publisher":"Marvel","series":"X-Men"}` {
				t.Errorf("subscription %+v: want pattern publisher,series and a canonical body", first)
			}
			st, err := s.Stats(ctx)
			if err != nil || st.Subscriptions != 3 {
				t.Fatalf("Stats = %+v, %v; want 3 subscriptions", st, err)
			}
		})
	}
}

func TestStore_deleteRemovesEveryIndexEntry(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			ctx := context.Background()
			rdb := be.client(t)
			s, _ := NewStore(rdb, StoreConfig{})
			a := mustSubscribe(t, s, "a@example.com", `{"publisher":"DC","key_issue":true}`)
			mustSubscribe(t, s, "b@example.com", `{"publisher":"DC"}`)
			if err := s.Delete(ctx, a.ID); err != nil {
				t.Fatal(err)
			}
			if err := s.Delete(ctx, a.ID); !errors.Is(err, ErrNotFound) {
				t.Errorf("second Delete = %v, want ErrNotFound", err)
			}
			st, err := s.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.Subscriptions != 1 || len(st.Patterns) != 1 || st.Patterns[0].Pattern != "publisher" {
				t.Errorf("stats after delete = %+v, want only the publisher pattern", st)
			}
			for _, f := range st.Fields {
				want := int64(0)
				if f.Field == "publisher" {
					want = 1
				}
				if f.Subscriptions != want {
					t.Errorf("field %s: %d subscriptions, want %d", f.Field, f.Subscriptions, want)
				}
			}
			// Only the remaining subscription's keys are left.
			keys, _ := rdb.Keys(ctx, "ds:{comic-subs}:comic:idx:*").Result()
			if len(keys) != 1 {
				t.Errorf("index keys %v, want 1", keys)
			}
			// Once re-created it is a new, valid subscription.
			mustSubscribe(t, s, "a@example.com", `{"publisher":"DC","key_issue":true}`)
		})
	}
}

func TestStore_rejectsInvalidSubscriptions(t *testing.T) {
	s, _ := NewStore(backends()[0].client(t), StoreConfig{MaxPerEmail: 2})
	ctx := context.Background()
	for _, tt := range []struct{ email, body, url, field string }{
		{"nobody", `{}`, "", "email"},
		{"a@example.com", `{"grade":11}`, "", "body.grade"},
		{"a@example.com", `{"colour":"red"}`, "", "body.colour"},
		{"a@example.com", `[]`, "", "body"},
		{"a@example.com", `{}`, "ftp://x", "notify_url"},
	} {
		_, err := s.Create(ctx, tt.email, json.RawMessage(tt.body), tt.url)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tt.field {
			t.Errorf("Create(%q, %s, %q) = %v, want an error naming %s", tt.email, tt.body, tt.url, err, tt.field)
		}
	}
	mustSubscribe(t, s, "a@example.com", `{}`)
	mustSubscribe(t, s, "a@example.com", `{"year":1990}`)
	if _, err := s.Create(ctx, "a@example.com", json.RawMessage(`{"year":1991}`), ""); !errors.Is(err, ErrTooMany) {
		t.Errorf("third subscription = %v, want ErrTooMany", err)
	}
}

// TestMatcher_everyPatternMatches subscribes one email per subset of the
// comic's fields (all 2^n SearchPatterns) with the comic's values, and
// one per non-empty subset with one value changed: the comic matches
// exactly the former.
func TestMatcher_everyPatternMatches(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			ctx := context.Background()
			rdb := be.client(t)
			s, _ := NewStore(rdb, StoreConfig{})
			c := comicN("The Amazing Spider-Man", 300, "Marvel", true)
			full := c.Body()
			other := comicN("Detective Comics", 27, "DC", false)
			other.Grade, other.Variant, other.Printing, other.Year = 5.0, "Newsstand", 2, 1939
			names := FieldNames()
			var want []string
			var subs []NewSubscription
			for mask := 0; mask < 1<<len(names); mask++ {
				b := Body{}
				for i, n := range names {
					if mask&(1<<i) != 0 {
						b[n] = full[n]
					}
				}
				email := fmt.Sprintf("m%d@example.com", mask)
				want = append(want, hashHex([]byte(email+"\x00"+string(b.Canonical()))))
				subs = append(subs, NewSubscription{Email: email, Body: b.Canonical()})
				if mask == 0 {
					continue
				}
				// The same pattern with the lowest field's value changed.
				low := names[firstBit(mask)]
				b[low] = other.Body()[low]
				subs = append(subs, NewSubscription{Email: fmt.Sprintf("n%d@example.com", mask), Body: b.Canonical()})
			}
			if n, err := s.CreateMany(ctx, subs); err != nil || n != len(subs) {
				t.Fatalf("CreateMany = %d, %v; want %d", n, err, len(subs))
			}
			slices.Sort(want)
			m := NewMatcher(rdb, NewTopics(2), nil, nil)
			got, err := m.MatchIDs(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1<<len(names) || !slices.Equal(got, want) {
				t.Fatalf("matched %d subscriptions, want exactly the %d of the comic's values", len(got), len(want))
			}
			// Strings match case-insensitively.
			shout := c
			shout.Series = strings.ToUpper(c.Series)
			shout.Publisher = "marvel"
			got, err = m.MatchIDs(ctx, shout)
			if err != nil || len(got) != len(want) {
				t.Errorf("upper-case comic matched %d, %v; want %d", len(got), err, len(want))
			}
			st, err := s.Stats(ctx)
			if err != nil || len(st.Patterns) != 1<<len(names) {
				t.Errorf("stats list %d patterns, %v; want %d", len(st.Patterns), err, 1<<len(names))
			}
		})
	}
}

func firstBit(mask int) int {
	for i := 0; ; i++ {
		if mask&(1<<i) != 0 {
			return i
		}
	}
}

// TestStore_bloatedPatternIsSharded checks the seed's mitigation: past
// BloatThreshold subscriptions, a pattern's new subscriptions go to a new
// shard, and matching still finds all of them.
func TestStore_bloatedPatternIsSharded(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			ctx := context.Background()
			rdb := be.client(t)
			s, _ := NewStore(rdb, StoreConfig{BloatThreshold: 3})
			var want []string
			for i := range 8 {
				want = append(want, mustSubscribe(t, s, fmt.Sprintf("u%d@example.com", i), `{"publisher":"Marvel"}`).ID)
			}
			mustSubscribe(t, s, "dc@example.com", `{"publisher":"DC"}`)
			st, err := s.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var pub PatternStat
			for _, p := range st.Patterns {
				if p.Pattern == "publisher" {
					pub = p
				}
			}
			wantShards := map[string]int{"publisher": 3, "publisher#1": 3, "publisher#2": 3}
			if pub.Subscriptions != 9 || fmt.Sprint(pub.Shards) != fmt.Sprint(wantShards) {
				t.Errorf("publisher pattern %+v, want 9 subscriptions over %v", pub, wantShards)
			}
			for _, f := range st.Fields {
				if f.Field == "publisher" && (f.Distinct != 2 || f.TopValue != "marvel" || f.TopCount != 8 || f.Diversity != 8.0/9) {
					t.Errorf("publisher diversity %+v, want top marvel 8 of 9", f)
				}
			}
			got, err := NewMatcher(rdb, NewTopics(2), nil, nil).MatchIDs(ctx, comicN("X-Men", 1, "Marvel", false))
			slices.Sort(want)
			if err != nil || !slices.Equal(got, want) {
				t.Errorf("matched %v, %v; want the 8 Marvel subscriptions over all shards", got, err)
			}
		})
	}
}
