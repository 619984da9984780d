package e2e

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/flows/checkout"
	"github.com/dropstream/dropstream/internal/testenv"
)

// startSentinelCheckoutCluster starts the three processes of a checkout
// cluster (startCheckoutClusterWith) on the primary the Sentinels of set
// name, each with the replica wait wait (--redis-wait).
func startSentinelCheckoutCluster(t *testing.T, bin string, set *testenv.RedisSentinel, wait string) *checkoutCluster {
	t.Helper()
	return startCheckoutClusterWith(t, bin, clusterOptions{RedisURL: set.URL(), Args: []string{"--redis-wait", wait}})
}

// TestCheckout_SentinelFailover_keepsEveryAnsweredCheckoutWithReplicaWait
// runs the consistency workload (1,000 concurrent checkouts of 100 units)
// over three processes on a primary with one replica behind three
// Sentinels, kills the primary with SIGKILL once 30 units are sold, and
// restarts it once the Sentinels promoted the replica (it comes back as a
// replica of the new primary). The processes follow the failover.
//
// With the replica wait on (--redis-wait 1/1s), every checkout answered
// 200 is still paid on the new primary and every one answered 400 unpaid:
// as many units sold and as much credit spent as 200 answers. With it off,
// the test lists the checkouts answered 200 that the failover lost; once
// the sweeper finished the attempts the failover left open, units sold,
// credit spent and orders paid are still equal, and no order answered 400
// is paid.
func TestCheckout_SentinelFailover_keepsEveryAnsweredCheckoutWithReplicaWait(t *testing.T) {
	bin := buildBinary(t)
	for _, mode := range []struct{ name, wait string }{{"wait-on", "1/1s"}, {"wait-off", "off"}} {
		t.Run(mode.name, func(t *testing.T) {
			// Sentinels quicker to deem a primary down failed the promoted
			// one over again under load, to the old primary still syncing.
			set := testenv.StartRedisSentinel(t, testenv.RedisSentinelConfig{DownAfter: 3 * time.Second})
			c := startSentinelCheckoutCluster(t, bin, set, mode.wait)
			w := c.setUp()
			var tally checkoutTally
			var final []int
			done := make(chan struct{})
			go func() { defer close(done); final = c.checkoutAll(w, &tally) }()
			testenv.WaitFor(t, time.Minute, func() bool {
				return c.soldInRedis(w) >= 30 || tally.answered.Load() == faultUsers
			}, "30 units sold")
			if n := tally.answered.Load(); n == faultUsers {
				t.Fatalf("every checkout answered before the fault")
			}
			answeredBefore := tally.answered.Load()
			set.Node(0).Kill()
			start := time.Now()
			p := set.WaitFailover(t, 0)
			t.Logf("primary killed with %d checkouts answered; the Sentinels promoted node %d after %s",
				answeredBefore, p, time.Since(start).Round(time.Millisecond))
			set.Node(0).Restart(t)
			<-done
			set.WaitReplicated(t)
			// A failover without the replica wait can lose the end of an
			// attempt (its commands or replies): the attempt stays open
			// until the sweeper sends its commands again and finishes it.
			testenv.WaitFor(t, 3*time.Minute, func() bool { return c.openAttempts() == 0 },
				"the sweeper finished every attempt left open by the failover")
			// An effect of an attempt the failover lost is undone by a
			// command of its own: wait until the stages have done them all.
			topics := checkout.NewTopics(8)
			groups := []group{{topics.Stock, checkout.StageStock}, {topics.Payment, checkout.StagePayment}}
			testenv.WaitFor(t, time.Minute, func() bool { return busy(context.Background(), c.rdb, groups) == "" },
				"the stages handled every command")
			if now := set.Primary(); now != p {
				t.Fatalf("the Sentinels failed over again, to node %d: the run is not of one failover", now)
			}
			c.verifyFailover(w, final, &tally, mode.wait != "off")
		})
	}
}

// verifyFailover checks, on the new primary, the answers of a run whose
// primary failed over: an order answered 200 is paid (else lost: an error
// when strict, listed otherwise), one answered 400 unpaid, and the units
// sold, the credit spent and the orders paid are equal.
func (c *checkoutCluster) verifyFailover(w checkoutWorkload, final []int, tally *checkoutTally, strict bool) {
	c.t.Helper()
	ctx := context.Background()
	keys := checkout.NewKeys(8)
	pipe := c.rdb.Pipeline()
	paidCmds := make([]*redis.StringCmd, len(w.orders))
	creditCmds := make([]*redis.StringCmd, len(w.orders))
	for i, id := range w.orders {
		paidCmds[i] = pipe.HGet(ctx, keys.Order(id), "paid")
		creditCmds[i] = pipe.HGet(ctx, keys.User(strconv.Itoa(i)), "credit")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		c.t.Fatal(err)
	}
	var lost, paidAfter400 []string
	ok200, paid := 0, 0
	var credit int64
	for i, id := range w.orders {
		if errors.Is(paidCmds[i].Err(), redis.Nil) {
			c.t.Errorf("order %s is gone after the failover", id)
		}
		isPaid := paidCmds[i].Val() == "1"
		if isPaid {
			paid++
		}
		n, err := creditCmds[i].Int64()
		if err != nil {
			c.t.Fatalf("credit of user %d: %v", i, err)
		}
		credit += n
		switch final[i] {
		case http.StatusOK:
			ok200++
			if !isPaid {
				lost = append(lost, id)
			}
		case http.StatusBadRequest:
			if isPaid {
				paidAfter400 = append(paidAfter400, id)
			}
		}
	}
	sold := c.soldInRedis(w)
	spent := int64(faultUsers) - credit
	c.t.Logf("answered %d (200: %d, 400: %d); retried: %d × 503, %d × other 5xx, %d without an answer; after the failover: %d orders paid, %d units sold, %d credit spent",
		tally.answered.Load(), ok200, int(tally.answered.Load())-ok200, tally.unavailable.Load(), tally.other5xx.Load(),
		tally.transport.Load(), paid, sold, spent)
	if sold != int64(paid) || spent != int64(paid) {
		c.t.Errorf("after the failover %d units sold, %d credit spent, %d orders paid: want them equal", sold, spent, paid)
		c.explain(w, paidCmds, creditCmds)
	}
	if len(paidAfter400) > 0 {
		c.t.Errorf("%d orders answered 400 are paid: %v", len(paidAfter400), paidAfter400)
	}
	switch {
	case strict && (len(lost) > 0 || ok200 != paid):
		c.t.Errorf("with the replica wait on, %d checkouts answered 200 were lost by the failover (%v); %d answered 200, %d paid",
			len(lost), lost, ok200, paid)
	case !strict:
		c.t.Logf("with the replica wait off, the failover lost %d checkouts answered 200: %v", len(lost), lost)
	}
}

// TestCheckout_LinearizableSentinelFailover records the contract's history
// (8 clients) over three processes on a primary behind three Sentinels,
// with the replica wait on (--redis-wait 1/1s), kills the primary with
// SIGKILL and restarts it once the replica is promoted; the clients run
// on while it rejoins as a replica. What the docs
// promise with the replica wait on: the checker finds the history
// linearizable, so no answered change was lost by the failover.
func TestCheckout_LinearizableSentinelFailover(t *testing.T) {
	// down-after 3 s: see TestCheckout_SentinelFailover_keepsEveryAnsweredCheckoutWithReplicaWait.
	set := testenv.StartRedisSentinel(t, testenv.RedisSentinelConfig{DownAfter: 3 * time.Second})
	c := startSentinelCheckoutCluster(t, buildBinary(t), set, "1/1s")
	failover := fault{"kill -9 of the primary, Sentinel failover", func(t *testing.T, _ *checkoutCluster, _ *toxicRedis) {
		set.Node(0).Kill()
		start := time.Now()
		p := set.WaitFailover(t, 0)
		t.Logf("the Sentinels promoted node %d after %s", p, time.Since(start).Round(time.Millisecond))
		set.Node(0).Restart(t)
		// Until the old primary rejoins as a replica, every write answers
		// 503 (no replica to wait for): the run goes on once it is back.
		set.WaitReplicasOnline(t, 5*time.Minute)
		t.Logf("node 0 rejoined as a replica after %s", time.Since(start).Round(time.Millisecond))
		if now := set.Primary(); now != p {
			t.Fatalf("the Sentinels failed over again, to node %d: the run is not of one failover", now)
		}
	}}
	if res := linearRun(t, c, nil, 300, []fault{failover}); !res.Linearizable() {
		t.Errorf("not linearizable across the failover: %s", res)
	}
}

// explain logs, for the first orders whose payment and paid flag disagree,
// the order, its sagas and its payment ledger entries.
func (c *checkoutCluster) explain(w checkoutWorkload, paidCmds, creditCmds []*redis.StringCmd) {
	ctx := context.Background()
	keys := checkout.NewKeys(8)
	shown := 0
	for i, id := range w.orders {
		paid, credit := paidCmds[i].Val() == "1", creditCmds[i].Val()
		if paid == (credit == "0") || shown == 5 {
			continue
		}
		shown++
		o := c.rdb.HGetAll(ctx, keys.Order(id)).Val()
		c.t.Logf("order %s user %d: credit %s, order %v", id, i, credit, o)
		tr, _ := strconv.Atoi(o["tr"])
		for n := 1; n <= tr; n++ {
			h := c.rdb.HGetAll(ctx, keys.Saga(id, int64(n))).Val()
			delete(h, "cmd:pay")
			c.t.Logf("  saga %d: %v", n, h)
		}
		ledger := c.rdb.Keys(ctx, "*ledger:checkout-payment:"+id+":*").Val()
		for _, k := range ledger {
			c.t.Logf("  %s = %s", k, c.rdb.Get(ctx, k).Val())
		}
	}
}
