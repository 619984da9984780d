package diff

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/internal/testenv"
)

// maxBytesPerEntity is the memory target of the diff state: 250 bytes per
// entity at 1,000,000 entities in 10,000 scopes.
const maxBytesPerEntity = 250

// TestMemory_perEntity measures, on a real redis-server, the memory the
// diff state takes per entity (100 scopes × 100 entities, in steady state
// with 1% churn, so some entities are pending) in two ways: MEMORY USAGE
// of every state key, and the used_memory that deleting them frees. Output
// streams are not state (they are trimmed) and are excluded. The figures
// are logged; the test fails above the target.
func TestMemory_perEntity(t *testing.T) {
	const scopes, perScope = 100, 100
	rdb := testenv.Dial(t, testenv.RedisURL(t))
	ctx := context.Background()
	topics := avail.NewTopics(8)
	fleet := newChurnFleet(scopes, perScope)
	for range 3 { // baseline, confirmation, then one churned run
		in := make([]Input, scopes)
		for s := range in {
			in[s] = Input{Snapshot: fleet.next(s), TraceParent: testTraceParent}
		}
		if _, err := ApplyBatch(ctx, rdb, topics, in); err != nil {
			t.Fatal(err)
		}
	}
	var total, open, pendingEntries int64
	for _, scope := range fleet.scopes {
		keys, err := KeysOf(topics, scope)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{keys.Open, keys.Scope, keys.Pending} {
			n, err := rdb.MemoryUsage(ctx, k, 0).Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				t.Fatalf("memory usage %s: %v", k, err)
			}
			total += n
		}
		n, err := rdb.HLen(ctx, keys.Open).Result()
		if err != nil {
			t.Fatal(err)
		}
		open += n
		p, err := rdb.HLen(ctx, keys.Pending).Result()
		if err != nil {
			t.Fatal(err)
		}
		pendingEntries += p
	}
	if open != scopes*perScope {
		t.Fatalf("%d open entities, want %d", open, scopes*perScope)
	}
	perEntity := float64(total) / float64(open)
	enc, _ := rdb.ObjectEncoding(ctx, mustKeys(t, topics, fleet.scopes[0]).Open).Result()
	t.Logf("diff state: %d bytes for %d entities in %d scopes (%d pending entries): %.1f bytes per entity (open set encoding %s)",
		total, open, scopes, pendingEntries, perEntity, enc)
	// The allocator's view: what deleting the state keys frees, which also
	// counts the keyspace and expiry entries and allocation rounding that
	// MEMORY USAGE leaves out. Only exact on a server of the test's own.
	var stateKeys []string
	for _, scope := range fleet.scopes {
		k := mustKeys(t, topics, scope)
		stateKeys = append(stateKeys, k.Open, k.Scope, k.Pending)
	}
	used := usedMemory(t, rdb)
	if err := rdb.Del(ctx, stateKeys...).Err(); err != nil {
		t.Fatal(err)
	}
	freed := float64(used-usedMemory(t, rdb)) / float64(open)
	t.Logf("deleting the state freed %.1f bytes per entity (used_memory)", freed)
	if private := os.Getenv(testenv.EnvRedisURL) == ""; private && freed > maxBytesPerEntity {
		t.Errorf("%.1f bytes per entity freed, above the %d-byte target", freed, maxBytesPerEntity)
	}
	if perEntity > maxBytesPerEntity {
		t.Errorf("%.1f bytes per entity, above the %d-byte target", perEntity, maxBytesPerEntity)
	}
}

func mustKeys(t *testing.T, topics avail.Topics, scope string) Keys {
	t.Helper()
	k, err := KeysOf(topics, scope)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// usedMemory returns INFO memory's used_memory.
func usedMemory(t *testing.T, rdb redis.UniversalClient) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no used_memory in INFO memory")
	return 0
}
