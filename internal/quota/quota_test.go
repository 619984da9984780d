package quota_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"

	"github.com/dropstream/dropstream/internal/quota"
	"github.com/dropstream/dropstream/internal/testenv"
)

func TestQuota_capsEachOwner(t *testing.T) {
	for _, be := range testenv.WithCluster() {
		t.Run(be.Name, func(t *testing.T) {
			ctx := t.Context()
			q, err := quota.New(be.Client(t), "things", 2)
			if err != nil {
				t.Fatal(err)
			}
			steps := []struct {
				op, owner, id string
				exceeded      bool
			}{
				{"claim", "a", "1", false},
				{"claim", "a", "1", false}, // again: no second slot
				{"claim", "a", "2", false},
				{"claim", "a", "3", true},
				{"claim", "b", "3", false}, // another owner has its own cap
				{"claim", "b", "1", false}, // filed under a: stays a's
				{"release", "a", "2", false},
				{"release", "a", "2", false}, // twice: changes nothing
				{"release", "a", "nope", false},
				{"claim", "a", "4", false},
				{"claim", "a", "5", true},
			}
			for i, s := range steps {
				var err error
				if s.op == "claim" {
					err = q.Claim(ctx, s.owner, s.id)
				} else {
					err = q.Release(ctx, s.id)
				}
				if errors.Is(err, quota.ErrExceeded) != s.exceeded || (err != nil && !s.exceeded) {
					t.Fatalf("step %d %s %s/%s: %v, exceeded want %v", i, s.op, s.owner, s.id, err, s.exceeded)
				}
			}
			for owner, want := range map[string]int64{"a": 2, "b": 1, "c": 0} {
				if n, err := q.Count(ctx, owner); err != nil || n != want {
					t.Errorf("Count(%s) = %d, %v; want %d", owner, n, err, want)
				}
			}
		})
	}
}

func TestQuota_concurrentClaimsNeverPassTheCap(t *testing.T) {
	for _, be := range testenv.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			ctx := t.Context()
			q, err := quota.New(be.Client(t), "things", 10)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			var mu sync.Mutex
			granted := 0
			for i := range 50 {
				wg.Go(func() {
					err := q.Claim(ctx, "a", strconv.Itoa(i))
					if err != nil && !errors.Is(err, quota.ErrExceeded) {
						t.Error(err)
					}
					if err == nil {
						mu.Lock()
						granted++
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			if n, _ := q.Count(ctx, "a"); granted != 10 || n != 10 {
				t.Fatalf("granted %d, count %d; want 10 and 10", granted, n)
			}
		})
	}
}

func TestNew_refusesABadCap(t *testing.T) {
	for _, tc := range []struct {
		kind string
		max  int
	}{{"", 1}, {"x", 0}, {"x", -1}} {
		if _, err := quota.New(nil, tc.kind, tc.max); err == nil {
			t.Errorf("New(%q, %d) accepted", tc.kind, tc.max)
		}
	}
}

func TestReservation_holdsASlotUntilKeptOrDropped(t *testing.T) {
	for _, be := range testenv.WithCluster() {
		t.Run(be.Name, func(t *testing.T) {
			ctx := t.Context()
			q, err := quota.New(be.Client(t), "things", 2)
			if err != nil {
				t.Fatal(err)
			}
			count := func(want int64) {
				t.Helper()
				if n, err := q.Count(ctx, "a"); err != nil || n != want {
					t.Fatalf("Count = %d, %v; want %d", n, err, want)
				}
			}
			r1, err := q.Reserve(ctx, "a")
			if err != nil {
				t.Fatal(err)
			}
			r2, err := q.Reserve(ctx, "a")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := q.Reserve(ctx, "a"); !errors.Is(err, quota.ErrExceeded) {
				t.Fatalf("third reservation: %v, want ErrExceeded", err)
			}
			if err := r1.Keep(ctx, "x"); err != nil {
				t.Fatal(err)
			}
			if err := r2.Drop(ctx); err != nil {
				t.Fatal(err)
			}
			count(1)
			// A reservation kept for an id filed already (a replace) frees
			// its slot.
			r3, err := q.Reserve(ctx, "a")
			if err != nil {
				t.Fatal(err)
			}
			if err := r3.Keep(ctx, "x"); err != nil {
				t.Fatal(err)
			}
			count(1)
			if err := q.Release(ctx, "x"); err != nil {
				t.Fatal(err)
			}
			count(0)
			var none *quota.Quota
			if r, err := none.Reserve(ctx, "a"); r != nil || err != nil || r.Keep(ctx, "y") != nil || r.Drop(ctx) != nil {
				t.Errorf("nil quota: reservation %v, %v; want nil, nil and no-op Keep and Drop", r, err)
			}
		})
	}
}

func TestQuota_withExistsFreesTheSlotsOfRemovedRecordsAtTheCap(t *testing.T) {
	for _, be := range testenv.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			ctx := t.Context()
			stored := map[string]bool{"a": true, "b": true}
			var mu sync.Mutex
			base, err := quota.New(be.Client(t), "things", 3)
			if err != nil {
				t.Fatal(err)
			}
			q := base.WithExists(func(_ context.Context, id string) (bool, error) {
				mu.Lock()
				defer mu.Unlock()
				return stored[id], nil
			})
			for _, id := range []string{"a", "b"} {
				if err := q.Claim(ctx, "o", id); err != nil {
					t.Fatal(err)
				}
			}
			// A reservation from a process that died long ago.
			if err := q.Claim(ctx, "o", "\x00ticket:0:dead"); err != nil {
				t.Fatal(err)
			}
			if err := base.Claim(ctx, "o", "c"); err != nil {
				t.Fatalf("claim at the cap with a stale reservation: %v, want its slot reclaimed", err)
			}
			mu.Lock()
			stored["c"] = true
			delete(stored, "a") // removed without a release
			mu.Unlock()
			if err := base.Claim(ctx, "o", "d"); !errors.Is(err, quota.ErrExceeded) {
				t.Fatalf("claim at the cap without WithExists: %v, want ErrExceeded", err)
			}
			if err := q.Claim(ctx, "o", "d"); err != nil {
				t.Fatalf("claim at the cap with a removed record: %v, want its slot reclaimed", err)
			}
			mu.Lock()
			stored["d"] = true
			mu.Unlock()
			if err := q.Claim(ctx, "o", "e"); !errors.Is(err, quota.ErrExceeded) {
				t.Fatalf("claim at the cap with every record stored: %v, want ErrExceeded", err)
			}
		})
	}
}
