package streamtest

import (
	"context"
	"testing"
	"time"

	"github.com/dropstream/dropstream/internal/rediskey"
	"github.com/dropstream/dropstream/stream"
)

func testLedgerOnceByKey(t *testing.T, b Backend) {
	rdb := b.Client(t)
	ctx := context.Background()
	topic := newTopic(4)
	l, err := stream.NewLedger(rdb, stream.LedgerConfig{Name: "charges", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	tag := topic.HashTag(topic.Partition("order-7"))
	credit := stream.NewEffect(`
local v = tonumber(ARGV[1])
if v == nil then return redis.error_reply('amount is not a number') end
return redis.call('INCRBY', KEYS[1], v)`)
	balance := rediskey.Key(tag, "balance", "u1")
	effectKey := l.Key(tag, "pay:order-9")
	for i, want := range []bool{true, false, false} {
		applied, res, err := l.Apply(ctx, credit, effectKey, []string{balance}, 25)
		if err != nil || applied != want {
			t.Fatalf("apply #%d = %v, %v; want %v", i, applied, err, want)
		}
		if want && res != int64(25) {
			t.Errorf("apply result %v, want 25", res)
		}
	}
	if got, _ := rdb.Get(ctx, balance).Int(); got != 25 {
		t.Errorf("balance %d after three applies of one key, want 25", got)
	}
	// A failing body records nothing, so a corrected retry applies.
	failing := l.Key(tag, "pay:order-10")
	if _, _, err := l.Apply(ctx, credit, failing, []string{balance}, "abc"); err == nil {
		t.Error("apply with a bad amount succeeded")
	}
	if seen, _ := rdb.Exists(ctx, failing).Result(); seen != 0 {
		t.Error("failed effect was recorded in the ledger")
	}
	if applied, _, err := l.Apply(ctx, credit, failing, []string{balance}, 5); err != nil || !applied {
		t.Errorf("retry after failure = %v, %v; want applied", applied, err)
	}
	if got, _ := rdb.Get(ctx, balance).Int(); got != 30 {
		t.Errorf("balance %d, want 30", got)
	}
}
