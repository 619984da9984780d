package throttle

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/ratelimit"
	"github.com/dropstream/dropstream/internal/testenv"
)

// start returns a throttle of cfg over a fresh database of b, its client,
// and its clock, which the test sets.
func start(t *testing.T, b testenv.Backend, cfg Config) (*Throttle, redis.UniversalClient, *time.Time) {
	t.Helper()
	rdb := b.Client(t)
	now := time.Unix(1_800_000_000, 0)
	cfg.Now = func() time.Time { return now }
	th, err := New(rdb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return th, rdb, &now
}

func TestThrottle_bucketsAndRetryAfter(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			th, _, now := start(t, b, Config{Destination: Limit{Rate: 2, Burst: 3}, Channels: map[string]Limit{"email": {Rate: 1, Burst: 4}}})
			// Burst of 3 for one destination, then a wait of 1/rate.
			for i := range 3 {
				if w, err := th.Take(ctx, "a", "webhook"); err != nil || w != 0 {
					t.Fatalf("take %d: wait %s, %v", i, w, err)
				}
			}
			if w, _ := th.Take(ctx, "a", "webhook"); w != 500*time.Millisecond {
				t.Fatalf("4th take waits %s, want 500ms", w)
			}
			// Another destination has its own bucket.
			if w, _ := th.Take(ctx, "b", "webhook"); w != 0 {
				t.Fatalf("other destination waits %s", w)
			}
			*now = now.Add(500 * time.Millisecond)
			if w, _ := th.Take(ctx, "a", "webhook"); w != 0 {
				t.Fatalf("after refill: wait %s", w)
			}
			// The email channel's bucket (burst 4) limits across destinations,
			// and a refusal by it spends no destination token.
			for i, d := range []string{"c", "d", "e", "f"} {
				if w, _ := th.Take(ctx, d, "email"); w != 0 {
					t.Fatalf("email take %d waits %s", i, w)
				}
			}
			if w, _ := th.Take(ctx, "g", "email"); w != time.Second {
				t.Fatalf("5th email waits %s, want 1s", w)
			}
			*now = now.Add(time.Second)
			if w, _ := th.Take(ctx, "g", "email"); w != 0 {
				t.Fatalf("g's bucket was spent by the refusal: wait %s", w)
			}
			// Retry-After blocks the destination, whatever its tokens.
			ra, ok := ratelimit.ParseRetryAfter("30", *now, 24*time.Hour)
			if !ok || ra != 30*time.Second {
				t.Fatalf("ParseRetryAfter = %s, %v", ra, ok)
			}
			if err := th.Block(ctx, "b", now.Add(ra)); err != nil {
				t.Fatal(err)
			}
			if w, _ := th.Take(ctx, "b", "webhook"); w != 30*time.Second {
				t.Fatalf("blocked destination waits %s, want 30s", w)
			}
			*now = now.Add(31 * time.Second)
			if w, _ := th.Take(ctx, "b", "webhook"); w != 0 {
				t.Fatalf("after Retry-After: wait %s", w)
			}
		})
	}
}

// With throttling disabled no bucket is kept or spent: a batch of takes
// only checks the Retry-After blocks (in one ZMSCORE), which still apply
// per destination, and the set of blocks expires after the last one.
func TestThrottle_disabledOnlyBlocks(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			th, rdb, now := start(t, b, Config{Disabled: true, IdleTTL: time.Minute})
			asks := []Ask{{Dest: "a", Channel: "webhook"}, {Dest: "b", Channel: "webhook"}, {Dest: "a", Channel: "email"}}
			for range 50 {
				waits, errs := th.TakeMany(ctx, asks)
				for i := range asks {
					if waits[i] != 0 || errs[i] != nil {
						t.Fatalf("take %v: wait %s, %v; want none", asks[i], waits[i], errs[i])
					}
				}
			}
			if n, err := rdb.Exists(ctx, DestinationKey("a"), ChannelKey("webhook")).Result(); err != nil || n != 0 {
				t.Fatalf("%d bucket keys, %v: want none kept", n, err)
			}
			if err := th.Block(ctx, "a", now.Add(30*time.Second)); err != nil {
				t.Fatal(err)
			}
			if err := th.Block(ctx, "a", now.Add(10*time.Second)); err != nil { // a shorter block does not shorten it
				t.Fatal(err)
			}
			waits, errs := th.TakeMany(ctx, asks)
			if waits[0] != 30*time.Second || waits[1] != 0 || waits[2] != 30*time.Second || errors.Join(errs...) != nil {
				t.Fatalf("waits %v, %v: want a blocked 30s on every channel, b free", waits, errs)
			}
			if w, err := th.Take(ctx, "a", "webhook"); w != 30*time.Second || err != nil {
				t.Fatalf("Take: %s, %v", w, err)
			}
			if ttl, err := rdb.PTTL(ctx, BlockedKey).Result(); err != nil || ttl <= 0 || ttl > 30*time.Second+time.Minute {
				t.Fatalf("blocks kept for %s, %v: want until the block ends plus the idle ttl", ttl, err)
			}
			*now = now.Add(30 * time.Second)
			if waits, _ := th.TakeMany(ctx, asks); waits[0] != 0 || waits[2] != 0 {
				t.Fatalf("after the block: waits %v", waits)
			}
		})
	}
}

// TestTakeMany_takesOnceAfterAScriptFlush: takes that find the script
// missing are sent again once it is loaded, and spend one token each.
func TestTakeMany_takesOnceAfterAScriptFlush(t *testing.T) {
	for _, b := range testenv.PrivateBackends() {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			th, rdb, _ := start(t, b, Config{Destination: Limit{Rate: 1, Burst: 3}})
			if err := th.Block(ctx, "blocked", th.cfg.Now().Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
			if err := rdb.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			a, b := Ask{Dest: "a", Channel: "webhook"}, Ask{Dest: "b", Channel: "webhook"}
			asks := []Ask{a, a, b, a, a, {Dest: "blocked", Channel: "webhook"}}
			waits, errs := th.TakeMany(ctx, asks)
			want := []time.Duration{0, 0, 0, 0, time.Second, time.Minute}
			for i := range asks {
				if errs[i] != nil || waits[i] != want[i] {
					t.Errorf("ask %d (%s): wait %s, %v; want %s", i, asks[i].Dest, waits[i], errs[i], want[i])
				}
			}
		})
	}
}
