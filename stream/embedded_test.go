package stream_test

import (
	"context"
	"testing"
	"time"

	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// TestEmbedded_keysExpireOnTheWallClock: in embedded mode a key set with
// a TTL is gone once the TTL has passed, and a key without one stays, as on
// a real Redis (leases, poll gates and caches rely on it).
func TestEmbedded_keysExpireOnTheWallClock(t *testing.T) {
	emb, err := stream.StartEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Close()
	ctx := context.Background()
	rdb := testenv.Dial(t, emb.URL())
	if err := rdb.Set(ctx, "lease", "me", 300*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, "kept", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if ttl := rdb.PTTL(ctx, "lease").Val(); ttl <= 0 || ttl > 300*time.Millisecond {
		t.Fatalf("PTTL right after SET PX 300 = %v", ttl)
	}
	testenv.WaitFor(t, 10*time.Second, func() bool { return rdb.Exists(ctx, "lease").Val() == 0 }, "the key with a TTL expired")
	if rdb.Exists(ctx, "kept").Val() != 1 {
		t.Error("a key without a TTL expired")
	}
}
