// Package comic is the comic flow (seed 000, "Comicazi"): a published
// Comic JSON Schema with strict validation and a canonical form; email
// subscriptions to partial comics indexed by SearchPattern and values;
// intake of comics into inventory; resumable notification jobs as stream
// stages; purchases where exactly one buyer of a comic wins.
//
// # Identity
//
// A comic's canonical form is its JSON with keys sorted, defaults filled
// (variant "", printing 1, key_issue false), no white space and grades as
// the CGC decimal; its id is the first 128 bits of the SHA-256 of that
// form. A subscription's id is derived from (lower-cased email, canonical
// body), which is the seed's unique index on (email, body).
//
// # Matching
//
// A SearchPattern is the sorted, comma-joined field names of a
// subscription body. Each subscription is filed in exactly one index set,
// keyed by its pattern (shard) and the hash of its values, strings
// case-folded. Matching a comic expands only the patterns that have at
// least one subscription (a sorted set scored by count, so the 2^n
// possible patterns are never enumerated): the matcher caches that list
// with the version counter the subscription scripts bump when a shard
// appears or disappears, and in the steady state one pipeline reads the
// version and does one SMEMBERS per active pattern shard; a moved version
// rereads the list. The cost is one lookup per active pattern plus the
// size of the answer, whatever the number of subscriptions. The matcher
// stage matches the jobs of a batch concurrently.
//
// # Improvements on the seed
//
//   - Intake: the seed's steps 2–4 (pending queries, job, inventory insert)
//     could fail half-way, notifying a comic not in inventory. Here one Lua
//     script writes the inventory hash, its generation, the job on the
//     jobs stream and the "listed" event, or nothing; a comic already in
//     inventory writes nothing and returns 200 with created=false.
//   - Jobs: the seed's handler loop with a per-handler number becomes the
//     "comic-matcher" consumer group. A dead copy's job is claimed by
//     another after ClaimIdle (XAUTOCLAIM) — the seed's "reassign the jobs
//     of an unhealthy handler" without a health protocol. The matcher hands
//     requests off in chunks; each chunk's script records the pending
//     notifications and XADDs them together, skipping emails already
//     pending or notified, and the last marks the job matched: a copy
//     killed between chunks leaves a consistent prefix and the next copy
//     hands off exactly the rest.
//   - PendingQuery disappears: the lookups are idempotent reads.
//   - Delivery ("comic-delivery") goes through notifier.Dispatcher and its
//     DeliveryLedger keyed by (comic, email), then records the comic's
//     notification history (the seed's Notification table) in the same
//     slot; the history keeps later jobs of the same comic (after a sale
//     and a relisting) from notifying anyone twice. A subscriber with
//     several matching subscriptions is notified once.
//   - Purchase: a saga of idempotent steps keyed by the transaction id: a
//     purchase record before the charge, the charge (through the checkout
//     saga), then one script that removes the comic from inventory, records
//     the sale and emits "sold" — so of concurrent buyers exactly one wins
//     — or marks the purchase refunding; losers are refunded and their
//     notification record (history entry and ledger record) is removed, so
//     they are told again if the comic comes back. A purchase interrupted
//     between charge and sale is settled by a retry of the transaction or
//     by Sales.Recover (the "comic-purchase-recovery" service).
//   - Bloated patterns: past StoreConfig.BloatThreshold subscriptions, a
//     pattern's new subscriptions go to shard "pattern#k"; no index set
//     grows much past the threshold, so no single SMEMBERS blocks Redis for
//     long. The seed's diversity heuristic (top value frequency ÷ total per
//     field) is reported by Store.Stats; matching does not need it because
//     lookups are by the exact values of every field of the pattern.
//   - Strings match case-insensitively with white space collapsed.
//
// # Redis layout
//
// Subscriptions share the hash tag {comic-subs} (see Store). Everything
// about one comic shares the tag {comic.p} of its partition p (see
// Topics): inventory, generation, job mark, pending notifications,
// notification history, sales and the three streams. On Redis Cluster the
// subscription index is one slot; the matcher never mixes it with comic
// keys in one script.
package comic
