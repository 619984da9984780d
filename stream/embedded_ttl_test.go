package stream

import (
	"context"
	"testing"
	"time"
)

func TestEmbedded_boundTTLsShortensOnlyLongerTTLs(t *testing.T) {
	e, err := StartEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	rdb, err := Dial(ctx, e.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	for k, ttl := range map[string]time.Duration{"week": 7 * 24 * time.Hour, "minute": time.Minute, "forever": 0} {
		if err := rdb.Set(ctx, k, "v", ttl).Err(); err != nil {
			t.Fatal(err)
		}
	}
	e.boundTTLs(30 * time.Minute)
	tests := []struct {
		key      string
		min, max time.Duration
	}{
		{"week", 29 * time.Minute, 30 * time.Minute},
		{"minute", time.Second, time.Minute},
		{"forever", -1, -1}, // no TTL
	}
	for _, tc := range tests {
		got, err := rdb.TTL(ctx, tc.key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got < tc.min || got > tc.max {
			t.Errorf("TTL(%s) = %s, want within [%s, %s]", tc.key, got, tc.min, tc.max)
		}
	}
}

// TestAgingWait_boundedStep: the wait between two steps of the embedded
// Redis's aging is agingShare times the last step, never under expiryTick
// and never over maxAgingWait, so a key renewed every third of a 15s TTL
// cannot expire at a jump of the clock.
func TestAgingWait_boundedStep(t *testing.T) {
	for _, tc := range []struct {
		took, want time.Duration
	}{
		{0, expiryTick},
		{time.Millisecond, expiryTick},
		{10 * time.Millisecond, agingShare * 10 * time.Millisecond},
		{time.Second, maxAgingWait},
		{time.Minute, maxAgingWait},
	} {
		if got := agingWait(tc.took); got != tc.want {
			t.Errorf("agingWait(%s) = %s, want %s", tc.took, got, tc.want)
		}
	}
	if maxAgingWait >= 15*time.Second*2/3 {
		t.Errorf("maxAgingWait %s lets a 15s lease renewed every 5s expire at a step", maxAgingWait)
	}
}
