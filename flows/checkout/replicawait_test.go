package checkout_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// TestContract_replicaWait_answersOnlyWhatTheReplicaHolds serves the
// contract over a primary with one replica (through its Sentinels) with
// the flow waiting for one replica. With the replica in sync, each answer
// comes once the replica holds what it says: right after a checkout's 200
// the replica has the order paid, the stock taken and the credit charged
// (writes the stages made, not the call). With the replica frozen, a stock
// change, a payment and a checkout are applied on the primary but answer
// 503 with Retry-After — not success; once it is back, checking the order
// out again answers 200, and the counts are exact.
func TestContract_replicaWait_answersOnlyWhatTheReplicaHolds(t *testing.T) {
	ctx := context.Background()
	set := testenv.StartRedisSentinel(t, testenv.RedisSentinelConfig{})
	e := newEnv(t, set.URL(), envOptions{retryFor: time.Second,
		wait: stream.ReplicaWait{Replicas: 1, Timeout: 200 * time.Millisecond}})
	replica := redis.NewClient(&redis.Options{Addr: set.Node(1).Addr()})
	t.Cleanup(func() { _ = replica.Close() })
	keys := e.svc.Store().Keys()
	onReplica := func(key, field string) string {
		t.Helper()
		v, err := replica.HGet(ctx, key, field).Result()
		if err != nil {
			t.Fatalf("replica: %s %s: %v", key, field, err)
		}
		return v
	}

	item := str(t, e.must(t, 200, "POST", "/stock/item/create/3"), "item_id")
	e.must(t, 200, "POST", "/stock/add/"+item+"/10")
	user := str(t, e.must(t, 200, "POST", "/payment/create_user"), "user_id")
	e.must(t, 200, "POST", "/payment/add_funds/"+user+"/100")
	order := func() string {
		id := str(t, e.must(t, 200, "POST", "/orders/create/"+user), "order_id")
		e.must(t, 200, "POST", "/orders/addItem/"+id+"/"+item+"/2")
		return id
	}
	first, second := order(), order()
	e.must(t, 200, "POST", "/orders/checkout/"+first)
	if paid, stock, credit := onReplica(keys.Order(first), "paid"), onReplica(keys.Item(item), "stock"),
		onReplica(keys.User(user), "credit"); paid != "1" || stock != "8" || credit != "94" {
		t.Fatalf("right after the checkout's 200 the replica has paid=%s stock=%s credit=%s; want 1, 8, 94", paid, stock, credit)
	}

	set.Node(1).Freeze(t)
	for _, path := range []string{"/stock/add/" + item + "/5", "/payment/pay/" + user + "/1", "/orders/checkout/" + second} {
		a := e.send("POST", path)
		if a.err != nil || a.code != http.StatusServiceUnavailable || a.errCode != "unavailable" || a.retryAfter != api.RetryAfterUnavailable {
			t.Errorf("POST %s with the replica frozen = %d %q (Retry-After %q), %v; want 503 unavailable with Retry-After %s",
				path, a.code, a.errCode, a.retryAfter, a.err, api.RetryAfterUnavailable)
		}
	}
	// Applied on the primary all the same: the 503 says the outcome is
	// unknown to the caller, not that nothing happened.
	if stock, _, _ := e.svc.Store().FindItem(ctx, item); stock != 8+5-2 {
		t.Errorf("stock on the primary %d, want 11: the stock change and the second checkout applied", stock)
	}

	set.Node(1).Resume()
	e.must(t, 200, "POST", "/orders/checkout/"+second)
	if paid, stock, credit := onReplica(keys.Order(second), "paid"), onReplica(keys.Item(item), "stock"),
		onReplica(keys.User(user), "credit"); paid != "1" || stock != "11" || credit != "87" {
		t.Errorf("after the second checkout's 200 the replica has paid=%s stock=%s credit=%s; want 1, 11, 87 (100 − 1 − 2 × 6)", paid, stock, credit)
	}
	if sold := onReplica(keys.Item(item), "sold"); sold != "4" {
		t.Errorf("replica has %s units sold, want 4: each order once", sold)
	}
}
