package throttle

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

func TestThrottle_bucketsAndRetryAfter(t *testing.T) {
	for name, url := range map[string]func(t *testing.T) string{
		"miniredis":    func(t *testing.T) string { return "redis://" + miniredis.RunT(t).Addr() },
		"redis-server": func(t *testing.T) string { return testenv.RedisURL(t) },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			rdb, err := stream.Dial(ctx, url(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = rdb.Close() })
			now := time.Unix(1_800_000_000, 0)
			th, err := New(rdb, Config{Destination: Limit{Rate: 2, Burst: 3}, Channels: map[string]Limit{"email": {Rate: 1, Burst: 4}},
				Now: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
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
			now = now.Add(500 * time.Millisecond)
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
			now = now.Add(time.Second)
			if w, _ := th.Take(ctx, "g", "email"); w != 0 {
				t.Fatalf("g's bucket was spent by the refusal: wait %s", w)
			}
			// Retry-After blocks the destination, whatever its tokens.
			ra, ok := ParseRetryAfter("30", now)
			if !ok || ra != 30*time.Second {
				t.Fatalf("ParseRetryAfter = %s, %v", ra, ok)
			}
			if err := th.Block(ctx, "b", now.Add(ra)); err != nil {
				t.Fatal(err)
			}
			if w, _ := th.Take(ctx, "b", "webhook"); w != 30*time.Second {
				t.Fatalf("blocked destination waits %s, want 30s", w)
			}
			now = now.Add(31 * time.Second)
			if w, _ := th.Take(ctx, "b", "webhook"); w != 0 {
				t.Fatalf("after Retry-After: wait %s", w)
			}
		})
	}
}

func TestParseRetryAfter_forms(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	cases := map[string]time.Duration{"0": 0, "120": 2 * time.Minute, "Sun, 22 Nov 2026 10:00:10 GMT": 10 * time.Second, "999999": 24 * time.Hour}
	for v, want := range cases {
		if got, ok := ParseRetryAfter(v, now); !ok || got != want {
			t.Errorf("%q: %s %v, want %s", v, got, ok, want)
		}
	}
	for _, bad := range []string{"", "-1", "soon"} {
		if _, ok := ParseRetryAfter(bad, now); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}
