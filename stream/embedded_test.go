package stream_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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

// TestEmbedded_requiresItsRandomPassword: the embedded Redis refuses a
// client without its password, and each start chooses a new one.
func TestEmbedded_requiresItsRandomPassword(t *testing.T) {
	ctx := context.Background()
	var urls []string
	for range 2 {
		emb, err := stream.StartEmbedded()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(emb.Close)
		urls = append(urls, emb.URL())
		if strings.Contains(emb.Addr(), "@") || !strings.HasSuffix(emb.URL(), "@"+emb.Addr()+"/0") {
			t.Fatalf("Addr %q, URL %q: want the address alone, and the URL with a password", emb.Addr(), emb.URL())
		}
		anon := redis.NewClient(&redis.Options{Addr: emb.Addr()})
		t.Cleanup(func() { _ = anon.Close() })
		if err := anon.Set(ctx, "k", "v", 0).Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
			t.Errorf("SET without the password = %v, want NOAUTH", err)
		}
		wrong := redis.NewClient(&redis.Options{Addr: emb.Addr(), Password: "guess"})
		t.Cleanup(func() { _ = wrong.Close() })
		if err := wrong.Ping(ctx).Err(); err == nil {
			t.Error("PING with a wrong password succeeded")
		}
		if err := testenv.Dial(t, emb.URL()).Set(ctx, "k", "v", 0).Err(); err != nil {
			t.Errorf("SET through URL(): %v", err)
		}
	}
	if urls[0][:len("redis://:")+32] == urls[1][:len("redis://:")+32] {
		t.Errorf("two starts chose the same password: %s, %s", urls[0], urls[1])
	}
}
