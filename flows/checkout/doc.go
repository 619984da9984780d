// Package checkout is the checkout saga on Redis Streams, with the
// order/stock/payment HTTP contract in package httpapi. A checkout sends one
// command per participant; there is no coordinator stage.
//
// # Data
//
// Items ({stock, price}), users ({credit}) and orders ({user_id, items,
// total_cost, paid, tr, status, ver}) are Redis hashes in the partition of
// their id. Their keys carry the hash tag "{checkout.p}" (see Keys), so each
// Lua script touches one slot, also on Redis Cluster.
//
// # The saga
//
//  1. Checkout runs the begin script on the order's slot: it numbers the
//     attempt (tr_num), marks the order pending, records the saga hash and
//     indexes the attempt among its partition's open attempts, in one step.
//     A paid order answers at once; a running attempt is joined; an order
//     changed since it was read is read again.
//  2. The call sends one "pay" command (in the user's partition) and one
//     "sub" stock command per partition of the order's items.
//  3. The stock and payment stages apply a command with the effect script,
//     which checks and records the ledger key (order_id, tr_num,
//     is_rollback) in the same slot as the effect. A stock command is all or
//     nothing over its partition's items.
//  4. The stage records each result in the saga with the outcome script
//     (HSETNX, once per part). When every part has answered, all ok pays
//     the order; otherwise each succeeded part gets a compensation ("add",
//     "can"), and the attempt fails once all are confirmed. A compensation
//     that arrives before its forward command marks it "cancelled". The
//     final step appends the saga record to the sagas stream, leaves the
//     open index and publishes the outcome on DoneChannel.
//  5. The HTTP call, registered with the Waiter before the attempt begins,
//     answers 200 on success and 400 with the reason on failure, once every
//     compensation is applied.
//  6. After Config.Timeout the call gives the attempt up: silent parts are
//     recorded "abandoned" (a real answer recorded first wins), the call
//     applies the compensations itself and answers 400 "no answer from
//     <part> in time", or 200 if the saga succeeded meanwhile. Only a Redis
//     failure leaves the outcome unknown (ErrPending, HTTP 500). A caller
//     that goes away does not give the attempt up; checking out again joins
//     it.
//
// Stock is split into one command per partition because one script cannot
// change items in several slots; one slot for every item would make it the
// flow's bottleneck.
//
// # Recovery
//
// Messages are delivered at least once and every step is idempotent: begin
// by the order's state, effects and compensations by the ledger, outcomes by
// HSETNX, the saga record by being written only on the final transition.
// With Redis persisted (AOF, fsync always) a restart is a pause; with
// Config.Wait a promoted replica holds every answered outcome.
//
// A command lost for good (never sent, dead-lettered, trimmed) is recovered
// by the sweeper (Flow.RunSweeper, service "checkout-sweeper"): it resends
// the commands of attempts open longer than Config.SweepAge, and after
// Config.AbandonAge records their silent parts "abandoned", so every attempt
// ends paid or compensated.
//
// # Observability
//
// Spans: "checkout.begin", one per command ("checkout.stock",
// "checkout.payment"), "checkout.give_up" and "checkout.sweep", all in the
// checkout's trace. The "checkout-analytics" stage writes one row per
// finished attempt to ClickHouse (checkout_sagas).
package checkout
