package diff

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/avail"
)

// testAdoptsLegacyOpenSet starts from the state an earlier version left —
// the open entities in a SET, without their opening — and checks that the
// next run diffs against them: a kept entity stays open (no transition), a
// missing one closes without a session (its opening is unknown), a new one
// opens, and the old set is gone.
func testAdoptsLegacyOpenSet(t *testing.T, rdb redis.UniversalClient) {
	ctx := context.Background()
	topics := avail.NewTopics(4)
	scope := "resy|legacy|2025-07-04|2"
	keys := mustKeys(t, topics, scope)
	kept, gone, added := slot("legacy", "18:00"), slot("legacy", "19:00"), slot("legacy", "20:00")
	first := snapOf(scope, 1, 1, kept, gone)
	if err := rdb.SAdd(ctx, keys.LegacyOpen, kept.Key, gone.Key).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, keys.Scope, "at", first.RunAt.UnixMilli(), "id", first.RunID, "ok", timeText(first.RunAt)).Err(); err != nil {
		t.Fatal(err)
	}
	res, err := Apply(ctx, rdb, topics, snapOf(scope, 2, 1, kept, added), "")
	if err != nil {
		t.Fatal(err)
	}
	if want := (Result{Applied: true, Opened: 1, Closed: 1, StableOpened: 1, StableClosed: 1}); res != want {
		t.Fatalf("result %+v, want %+v", res, want)
	}
	byKey := map[string]Transition{}
	for _, tr := range transitionsOf(t, rdb, topics, scope) {
		byKey[tr.Entity.Key] = tr
	}
	if len(byKey) != 2 {
		t.Fatalf("transitions of %v, want one close and one open", byKey)
	}
	if c := byKey[gone.Key]; c.Kind != avail.KindClose || c.OpenRunID != "" || c.OpenedAtMS != 0 || c.Baseline {
		t.Errorf("close of the adopted entity: %+v; want a close without an opening", c)
	}
	if o := byKey[added.Key]; o.Kind != avail.KindOpen || o.Baseline {
		t.Errorf("open: %+v; want a non-baseline open", o)
	}
	if n, err := rdb.Exists(ctx, keys.LegacyOpen).Result(); err != nil || n != 0 {
		t.Errorf("legacy set exists = %d, %v; want it deleted", n, err)
	}
	st, err := ReadState(ctx, rdb, topics, scope)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{kept.Key, added.Key}; len(st.Open) != 2 || st.Open[0] != want[0] || st.Open[1] != want[1] {
		t.Errorf("open %v, want %v", st.Open, want)
	}
	// The adopted entity that stays open closes later, still without a
	// session; the one opened since closes with its opening.
	if _, err := Apply(ctx, rdb, topics, snapOf(scope, 3, 1), ""); err != nil {
		t.Fatal(err)
	}
	all := transitionsOf(t, rdb, topics, scope)
	for _, tr := range all[len(all)-2:] {
		switch tr.Entity.Key {
		case kept.Key:
			if tr.OpenRunID != "" {
				t.Errorf("close of adopted %s carries open run %q", tr.Entity.Key, tr.OpenRunID)
			}
		case added.Key:
			if tr.OpenRunID != "run-0002" || tr.Entity.VenueName != added.VenueName {
				t.Errorf("close of %s: open run %q, venue name %q; want run-0002 and %q", tr.Entity.Key, tr.OpenRunID, tr.Entity.VenueName, added.VenueName)
			}
		default:
			t.Errorf("unexpected transition %+v", tr)
		}
	}
}
