// Package checkout is the checkout saga on Redis Streams; package httpapi
// serves its order/stock/payment HTTP contract. A checkout sends one command
// per participant, with no coordinator stage.
//
// Items, users and orders are Redis hashes whose keys carry the hash tag
// "{checkout.p}" of their partition (see Keys), so each Lua script touches
// one slot, also on Redis Cluster.
//
// A checkout:
//
//  1. Runs the begin script on the order's slot: it numbers the attempt,
//     gives it a random nonce, marks the order pending, records the saga
//     and indexes the open attempt. A paid order answers at once; a
//     running attempt is joined.
//  2. Sends one "pay" command and one "sub" stock command per partition of
//     the order's items (one script cannot change several slots).
//  3. The stages apply each command with the effect script, which checks
//     and records a ledger key (order_id, tr_num, nonce, is_rollback) in
//     the slot of the effect, and record the result with HSETNX. All ok
//     pays the order; otherwise each succeeded part is compensated. The
//     final step appends the saga to the sagas stream and publishes on
//     DoneChannel. A result whose nonce the saga does not know (an attempt
//     a failover lost) is not recorded, and its effect is undone.
//  4. The HTTP call answers 200, or 400 with the reason once every
//     compensation is applied. After Config.Timeout it records silent parts
//     "abandoned", compensates and answers 400; only a Redis failure leaves
//     the outcome unknown (ErrPending, HTTP 500).
//
// Delivery is at least once and every step is idempotent. The sweeper
// (Flow.RunSweeper) resends the commands of attempts open longer than
// Config.SweepAge and abandons them after Config.AbandonAge, so every
// attempt ends paid or compensated. The "checkout-analytics" stage writes
// one row per finished attempt to ClickHouse.
package checkout
