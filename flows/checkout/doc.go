// Package checkout is the checkout saga on Redis Streams: an order is paid
// and its stock taken by stock and payment stages that apply their effects
// exactly once and record them in the attempt's saga, where the answer
// that completes the attempt decides it and starts its compensations, and
// the well-known order/stock/payment HTTP contract (package httpapi). The
// checkout call itself begins the attempt and sends its commands: a
// checkout is one message per participant, with no coordinator stage
// between them.
//
// # Data
//
// Items ({stock, price}), users ({credit}) and orders ({user_id, items,
// total_cost, paid, tr, status, ver}) are Redis hashes, each in the
// partition of its id: its keys carry the hash tag "{checkout.p}" (see
// Keys), so every Lua script below touches one slot, also on Redis Cluster.
//
// # The saga
//
//  1. Checkout (HTTP) reads the order and runs the begin script on the
//     order's slot. It numbers the attempt (tr_num, the transaction
//     number), marks the order pending, records the attempt's saga hash
//     (its parts and their commands) and indexes it among the open
//     attempts of the order's partition — all in one step, so an attempt
//     is never started twice under two numbers. An order already paid
//     answers at once without charging; an order whose attempt is running
//     joins it; an order changed since it was read is read again.
//  2. The call then sends the attempt's commands: one payment command
//     ("pay", keyed by the user, in the user's partition) and one stock
//     command per partition of the order's items ("sub", keyed by an item
//     of that partition). A call that dies between the two steps leaves an
//     open attempt whose parts stay silent: the sweeper sends its commands
//     (see Recovery).
//  3. The stock and payment stages apply a command with the effect script:
//     the ledger key (order_id, tr_num, is_rollback) — a ledger table with
//     its three-part primary key — is checked and recorded by the same
//     script as the effect, in the slot of the keys the effect changes. A
//     stock command checks every item of its partition before it changes
//     any, so it is all or nothing. The ledger keeps the result ("ok",
//     "fail:<reason>"). A batch of commands read from one partition goes to
//     Redis as one script call, each command still checked and recorded
//     under its own ledger key.
//  4. The same stage then records each result in its attempt's saga with
//     the outcome script, on the order's slot — every time, so a result
//     whose recording was lost comes again with the redelivery of its
//     command. The script records it once per part (HSETNX), then decides
//     when every part has answered: all ok → the order is paid; otherwise
//     every part that succeeded gets its compensation ("add", "can"), which
//     the stage sends, and the attempt fails once each has confirmed. A
//     compensation undoes the effect only if the forward effect was
//     applied; if the forward command has not arrived yet, it records it
//     "cancelled" so it never applies. The step that reaches a final
//     status also appends the saga record (with every part's answer) to
//     the sagas stream (for ClickHouse), removes the attempt from the open
//     index and announces the outcome on the Pub/Sub channel DoneChannel,
//     in the same script. The results of a batch's commands are one script
//     call per partition of their orders.
//  5. The HTTP call, registered with the process's Waiter before the
//     attempt begins, wakes on the announcement (or on reading the saga's
//     status, when it starts waiting and every Config.Recheck), and answers
//     200 for a succeeded attempt, 400 with the reason for a failed one —
//     whose compensations are then all applied.
//  6. The wait is bounded by Config.Timeout. The contract knows only 200
//     and 400, and its 400 means "not paid, every compensation finished",
//     so a call whose wait expires does not answer "still running" (which
//     a client would take for a failure of a checkout that may yet be
//     paid): it gives the attempt up. The parts that have not answered are
//     recorded "abandoned" by the outcome script — a real answer recorded
//     first wins, one arriving later changes nothing — and the call
//     applies the attempt's compensations itself with the effect script
//     (idempotent by the ledger, like a stage's; a forward command still
//     on its way is recorded "cancelled" and never applies), records them,
//     and answers 400 "no answer from <part> in time" — or 200 if the
//     saga succeeded meanwhile. Only when Redis fails is the outcome
//     unknown (ErrPending, HTTP 500): the attempt then completes or is
//     compensated by the stages and the sweeper. A checkout whose caller
//     went away (an HTTP client timeout, a cancelled context) is not given
//     up: it completes or compensates all the same, and checking out again
//     joins it and answers its outcome.
//
// # Splitting stock by partition
//
// One stock message per transaction for all of its items would not do:
// items live in the partitions of their ids, so one script cannot change
// them all on Redis Cluster. The choice here: one command per partition of
// the order's items, each all-or-nothing in its slot and idempotent under
// its own ledger key (the key of partition p lives in p's slot, so
// (order_id, tr_num, is_rollback) is unique there), and compensated per
// partition like any other participant. Putting every item in one slot
// would make a single stock partition the bottleneck of the flow.
//
// # Recovery
//
// Every message is delivered at least once by the runtime (pending entries
// of a dead copy are redelivered; a restarted copy drains its own first).
// Every step is idempotent: the begin script by the order's state, effects
// by the ledger, outcomes by HSETNX on the saga, compensations by the
// ledger, the saga record by being appended only on the transition to a
// final status, the announcement by being harmless to repeat. A stage's
// output is never lost between steps: the effect and the outcome are
// recorded, and the compensations published, before the command is
// acknowledged; the saga record is written by the script that finishes
// the attempt. The saga hash is the attempt's durable state, and the
// consumer groups are the stages' offsets. With Redis persisted (AOF,
// fsync always), a restart at any point is a pause. A Sentinel failover
// resumes from what the promoted replica holds, an earlier state of the
// primary; with Config.Wait on it holds every outcome a call answered.
//
// A command can still go missing for good: never sent by a call that died
// after the begin script, dead-lettered after too many deliveries, or
// trimmed. The begin script indexes every attempt in the
// open set of its order's partition (Keys.Open) until the script that
// finishes it removes it, and the sweeper (Flow.Sweep, every
// Config.SweepInterval by Flow.RunSweeper, the flow's service
// "checkout-sweeper") takes attempts open longer than Config.SweepAge: it
// sends the commands of their silent parts or their unconfirmed compensations
// again (idempotent by the ledger), and after Config.AbandonAge records
// the parts still silent as "abandoned", which makes the attempt
// compensate them — undoing an effect that was applied, cancelling one
// that was not — and fail. So every attempt ends paid or compensated.
//
// # Observability
//
// The call's begin gets a span ("checkout.begin") and each command a span
// of its stage ("checkout.stock", "checkout.payment", with the part's
// result and the saga's status after it) that is a child of its
// producer's, and the messages it causes carry it on: the trace of a
// checkout runs from the HTTP span through the begin, the commands and
// the compensations to the saga record; an attempt given up
// at the end of the wait adds a "checkout.give_up" span under the HTTP
// span, and a swept one a "checkout.sweep" span in its trace. The
// "checkout-analytics" stage writes one row per finished attempt to
// ClickHouse (checkout_sagas: status, failure reason, parts, compensations,
// time to decide and to finish, trace id).
package checkout
