// Package checkout is the checkout saga on Redis Streams; package httpapi
// serves its order/stock/payment HTTP contract. A checkout sends one command
// per participant, with no coordinator stage. Items, users and orders are
// Redis hashes in the slot of their partition ("{checkout.p}", see Keys), so
// each Lua script touches one slot, also on Redis Cluster.
//
// A checkout:
//
//  1. Begins the attempt in one script on the order's slot: it numbers it,
//     draws a nonce, marks the order pending and records and indexes the
//     saga. A paid order answers at once; a running attempt is joined.
//  2. Sends one "pay" command and one "sub" command per stock partition.
//  3. The stages apply each command once per ledger key (order_id, tr_num,
//     nonce, is_rollback) and record its result in the saga. All ok pays the
//     order; otherwise each succeeded part is compensated. The final step
//     appends the saga to the sagas stream and publishes on DoneChannel. A
//     result of an attempt a failover lost (an unknown nonce) is undone.
//  4. The call answers 200, or 400 once every compensation is applied;
//     after Config.Timeout it records silent parts "abandoned", compensates
//     and answers 400. Only a Redis failure leaves it unknown (HTTP 500).
//
// Delivery is at least once and every step is idempotent. The sweeper
// (Flow.RunSweeper) resends the commands of attempts open past
// Config.SweepAge and abandons them after Config.AbandonAge, so every
// attempt ends paid or compensated. The "checkout-analytics" stage writes
// one row per finished attempt to ClickHouse.
package checkout
