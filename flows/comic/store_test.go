package comic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/tenancy"
)

func TestStore_duplicateSubscriptionIsRefused(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.Name, func(t *testing.T) {
			ctx := context.Background()
			s, err := NewStore(be.Client(t), StoreConfig{})
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
		t.Run(be.Name, func(t *testing.T) {
			ctx := context.Background()
			rdb := be.Client(t)
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
	s, _ := NewStore(backends()[0].Client(t), StoreConfig{MaxPerEmail: 2})
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

// TestStore_emailCapCountsPerTenant fills one email's cap as one tenant:
// another tenant still subscribes the same email up to its own cap, a
// delete frees a slot of its tenant's only, and each tenant lists its own
// subscriptions of the email while an admin view lists every one.
func TestStore_emailCapCountsPerTenant(t *testing.T) {
	ctx := t.Context()
	s, err := NewStore(backends()[0].Client(t), StoreConfig{MaxPerEmail: 2})
	if err != nil {
		t.Fatal(err)
	}
	const email = "shared@example.com"
	created := map[string][]string{}
	for _, step := range []struct {
		tenant, body string
		wantErr      error
	}{
		{"acme", `{"year":1990}`, nil},
		{"acme", `{"year":1991}`, nil},
		{"acme", `{"year":1992}`, ErrTooMany},
		{"globex", `{"year":1990}`, nil}, // the body acme subscribed too
		{"globex", `{"year":1993}`, nil},
		{"globex", `{"year":1994}`, ErrTooMany},
		{tenancy.Open, `{"year":1995}`, nil},
	} {
		sub, err := s.CreateFor(ctx, step.tenant, email, json.RawMessage(step.body), "")
		if !errors.Is(err, step.wantErr) {
			t.Fatalf("%s subscribes %s to %s = %v, want %v", step.tenant, email, step.body, err, step.wantErr)
		}
		if err == nil {
			created[step.tenant] = append(created[step.tenant], sub.ID)
		}
	}
	// A delete frees its own tenant's slot, not another's.
	if err := s.DeleteIn(ctx, tenancy.View{Tenant: "acme"}, created["acme"][0]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateFor(ctx, "globex", email, json.RawMessage(`{"year":1996}`), ""); !errors.Is(err, ErrTooMany) {
		t.Errorf("globex after acme's delete = %v, want ErrTooMany", err)
	}
	sub, err := s.CreateFor(ctx, "acme", email, json.RawMessage(`{"year":1996}`), "")
	if err != nil {
		t.Fatalf("acme after its delete: %v", err)
	}
	created["acme"] = append(created["acme"][1:], sub.ID)
	for _, tc := range []struct {
		name string
		v    tenancy.View
		want []string
	}{
		{"acme", tenancy.View{Tenant: "acme"}, created["acme"]},
		{"globex", tenancy.View{Tenant: "globex"}, created["globex"]},
		{"open", tenancy.View{Tenant: tenancy.Open}, created[tenancy.Open]},
		{"admin", tenancy.View{Tenant: "acme", All: true}, slices.Concat(created["acme"], created["globex"], created[tenancy.Open])},
	} {
		t.Run(tc.name, func(t *testing.T) {
			subs, err := s.ByEmailIn(ctx, tc.v, email)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, sub := range subs {
				got = append(got, sub.ID)
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tc.want))
			if !slices.Equal(got, want) {
				t.Errorf("ByEmailIn = %v, want %v", got, want)
			}
		})
	}
}

// TestMatcher_everyPatternMatches subscribes one email per subset of the
// comic's fields (all 2^n SearchPatterns) with the comic's values, and
// one per non-empty subset with one value changed: the comic matches
// exactly the former.
func TestMatcher_everyPatternMatches(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.Name, func(t *testing.T) {
			ctx := context.Background()
			rdb := be.Client(t)
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
			m := newMatcher(rdb, NewTopics(2))
			got, err := m.MatchIDs(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
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

// TestStore_bloatedPatternIsSharded checks the bloat mitigation: past
// BloatThreshold subscriptions, the value set of a pattern (everyone who
// asked for {"publisher":"Marvel"}) continues in a new shard; the other
// values of the pattern stay in one set, the stats report the bloat, and
// matching still finds every subscription, also after a delete.
func TestStore_bloatedPatternIsSharded(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.Name, func(t *testing.T) {
			ctx := context.Background()
			rdb := be.Client(t)
			s, _ := NewStore(rdb, StoreConfig{BloatThreshold: 3})
			var marvel []string
			for i := range 9 {
				marvel = append(marvel, mustSubscribe(t, s, fmt.Sprintf("u%d@example.com", i), `{"publisher":"Marvel"}`).ID)
			}
			// A bulk import fills the next shard (one pipeline may take a
			// shard past the threshold by up to its size).
			bulk := []NewSubscription{}
			for i := 9; i < 11; i++ {
				bulk = append(bulk, NewSubscription{Email: fmt.Sprintf("u%d@example.com", i), Body: json.RawMessage(`{"publisher":"Marvel"}`)})
				marvel = append(marvel, hashHex([]byte(fmt.Sprintf("u%d@example.com", i)+"\x00"+`{"publisher":"Marvel"}`)))
			}
			if n, err := s.CreateMany(ctx, bulk); err != nil || n != len(bulk) {
				t.Fatalf("CreateMany = %d, %v", n, err)
			}
			dc := mustSubscribe(t, s, "dc@example.com", `{"publisher":"DC"}`)
			sizes := map[string]int64{}
			keys, err := rdb.Keys(ctx, indexPrefix+"publisher:*").Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				sizes[strings.TrimPrefix(k, indexPrefix)] = rdb.SCard(ctx, k).Val()
			}
			vh := valuesHash(Body{"publisher": "Marvel"}, []string{"publisher"})
			want := map[string]int64{"publisher:" + vh: 3, "publisher:" + vh + "#1": 3, "publisher:" + vh + "#2": 3, "publisher:" + vh + "#3": 2,
				"publisher:" + valuesHash(Body{"publisher": "DC"}, []string{"publisher"}): 1}
			if fmt.Sprint(sizes) != fmt.Sprint(want) {
				t.Errorf("index sets %v\nwant         %v", sizes, want)
			}
			st, err := s.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Patterns) != 1 || st.Patterns[0] != (PatternStat{Pattern: "publisher", Subscriptions: 12, BloatedValueSets: 1, ExtraShards: 3}) {
				t.Errorf("patterns %+v, want publisher: 12 subscriptions, 1 bloated value set with 3 extra shards", st.Patterns)
			}
			for _, f := range st.Fields {
				if f.Field == "publisher" && (f.Distinct != 2 || f.TopValue != "marvel" || f.TopCount != 11 || f.Diversity != 11.0/12) {
					t.Errorf("publisher diversity %+v, want top marvel 11 of 12", f)
				}
			}
			m := newMatcher(rdb, NewTopics(2))
			got, err := m.MatchIDs(ctx, comicN("X-Men", 1, "Marvel", false))
			slices.Sort(got)
			slices.Sort(marvel)
			if err != nil || !slices.Equal(got, marvel) {
				t.Errorf("matched %d, %v; want the %d Marvel subscriptions over all shards", len(got), err, len(marvel))
			}
			// A deleted subscription of a shard is matched no more; a new
			// one goes to the last shard.
			if err := s.Delete(ctx, marvel[0]); err != nil {
				t.Fatal(err)
			}
			if sub := mustSubscribe(t, s, "new@example.com", `{"publisher":"Marvel"}`); sub.Shard != 3 {
				t.Errorf("new subscription in shard %d, want 3", sub.Shard)
			}
			got, err = m.MatchIDs(ctx, comicN("X-Men", 2, "Marvel", false))
			if err != nil || len(got) != len(marvel) || slices.Contains(got, marvel[0]) {
				t.Errorf("after delete and create: matched %d (%v), want %d without the deleted one", len(got), err, len(marvel))
			}
			if got, err := m.MatchIDs(ctx, comicN("Batman", 1, "DC", false)); err != nil || !slices.Equal(got, []string{dc.ID}) {
				t.Errorf("DC comic matched %v, %v; want only %s", got, err, dc.ID)
			}
		})
	}
}

// lookupCounter counts the SMEMBERS a client sends (the matcher's index
// lookups), in pipelines or alone.
type lookupCounter struct{ n atomic.Int64 }

func (c *lookupCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *lookupCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.count(cmd)
		return next(ctx, cmd)
	}
}
func (c *lookupCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.count(cmd)
		}
		return next(ctx, cmds)
	}
}
func (c *lookupCounter) count(cmd redis.Cmder) {
	if cmd.Name() == "smembers" {
		c.n.Add(1)
	}
}

// TestMatcher_expandsOnlyActivePatterns: of the 2^10 SearchPatterns,
// matching a comic looks up only those with at least one subscription —
// one SMEMBERS each, whatever the number of subscriptions or of values
// they ask for — and follows patterns appearing and disappearing.
func TestMatcher_expandsOnlyActivePatterns(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.Name, func(t *testing.T) {
			ctx := context.Background()
			rdb := be.Client(t)
			s, _ := NewStore(rdb, StoreConfig{})
			var subs []NewSubscription
			for i := range 300 { // 3 patterns, many values each
				subs = append(subs,
					NewSubscription{Email: fmt.Sprintf("s%d@example.com", i), Body: json.RawMessage(fmt.Sprintf(`{"series":"S%d"}`, i))},
					NewSubscription{Email: fmt.Sprintf("i%d@example.com", i), Body: json.RawMessage(fmt.Sprintf(`{"series":"S%d","issue":"%d"}`, i%10, i))},
					NewSubscription{Email: fmt.Sprintf("y%d@example.com", i), Body: json.RawMessage(fmt.Sprintf(`{"year":%d}`, 1900+i%200))})
			}
			if n, err := s.CreateMany(ctx, subs); err != nil || n != len(subs) {
				t.Fatalf("CreateMany = %d, %v", n, err)
			}
			counter := &lookupCounter{}
			rdb.AddHook(counter)
			m := newMatcher(rdb, NewTopics(2))
			lookups := func(c Comic) (int64, []string) {
				t.Helper()
				before := counter.n.Load()
				ids, err := m.MatchIDs(ctx, c)
				if err != nil {
					t.Fatal(err)
				}
				return counter.n.Load() - before, ids
			}
			// The comic matches one subscription of series S7, one of
			// (S7, 107), and two of 1907 (years repeat every 200).
			c := comicN("S7", 107, "Marvel", false)
			c.Year = 1907
			if n, ids := lookups(c); n != 3 || len(ids) != 4 {
				t.Errorf("first match: %d lookups, %d subscriptions; want 3 (one per pattern) and 4", n, len(ids))
			}
			// A fourth pattern appears; then the only subscription of one
			// pattern goes. The first match after each change finds the
			// version moved and looks up again; the next is steady.
			pub := mustSubscribe(t, s, "pub@example.com", `{"publisher":"Marvel"}`)
			if n, ids := lookups(c); n != 3+4 || len(ids) != 5 {
				t.Errorf("first match after a new pattern: %d lookups, %d subscriptions; want 3+4 and 5", n, len(ids))
			}
			if n, _ := lookups(c); n != 4 {
				t.Errorf("next match: %d lookups, want 4", n)
			}
			if err := s.Delete(ctx, pub.ID); err != nil {
				t.Fatal(err)
			}
			if _, ids := lookups(c); len(ids) != 4 {
				t.Errorf("after its only subscription went: %d subscriptions, want 4", len(ids))
			}
			if n, _ := lookups(c); n != 3 {
				t.Errorf("next match: %d lookups, want 3", n)
			}
		})
	}
}
