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
