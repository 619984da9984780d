// Package comic is the comic flow: a comic marketplace with a published
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
// body), so an email subscribes to one body once.
//
// # Matching
//
// A SearchPattern is the sorted, comma-joined field names of a
// subscription body. Each subscription is filed in exactly one index set,
// keyed by its pattern and the hash of its values, strings case-folded
// (and, once that set is bloated, by its shard). Matching a comic expands
// only the patterns that have at least one subscription (a sorted set
// scored by count, so the 2^n possible patterns are never enumerated):
// the matcher caches that list and the shards of bloated value sets with
// the version counter the subscription scripts bump when either changes,
// and in the steady state one pipeline reads the version and does one
// SMEMBERS per active pattern (plus one per extra shard of the comic's
// value sets); a moved version rereads the list. The cost is one lookup
// per active pattern plus the ids matched, whatever the number of
// subscriptions: the matcher never loads a subscription.
//
// # Guarantees
//
//   - Intake is atomic, so a comic not in inventory is never notified: one
//     Lua script writes the inventory hash, its generation, the job on the
//     jobs stream and the "listed" event, or nothing; a comic already in
//     inventory writes nothing and returns 200 with created=false.
//   - Jobs are read by the "comic-matcher" consumer group. A dead copy's
//     job is claimed by another after ClaimIdle (XAUTOCLAIM), so the jobs
//     of an unhealthy copy move on without a health protocol. The matcher hands
//     the matching subscription ids off in chunks; each chunk's script
//     records them as pending and XADDs them, MaxRequestBatch per notify
//     message, skipping the ids the job handed off already, and the last
//     marks the job matched: a copy killed between chunks leaves a
//     consistent prefix and the next copy hands off exactly the rest.
//   - Matching keeps no pending-query state: the lookups are idempotent
//     reads.
//   - Delivery ("comic-delivery") loads the subscribers of a notify message
//     in one read, skips every email already in the comic's notification
//     history (one entry per comic and email), delivers the rest through
//     notifier.Dispatcher and its DeliveryLedger keyed by (comic, email) —
//     or hands them to the notifier's request path — and records the
//     history in the comic's slot. The history keeps later jobs of the
//     same comic (after a sale and a relisting) from notifying anyone
//     twice, and a subscriber with several matching subscriptions is
//     notified once. Loading subscribers here, not in the matcher, keeps a
//     comic's matching cost proportional to the ids it matches.
//   - Purchase: a saga of idempotent steps keyed by the transaction id: a
//     purchase record before the charge, the charge (through the checkout
//     saga), then one script that removes the comic from inventory, records
//     the sale and emits "sold" — so of concurrent buyers exactly one wins
//     — or marks the purchase refunding; losers are refunded and their
//     notification record (history entry and ledger record) is removed, so
//     they are told again if the comic comes back. A purchase interrupted
//     between charge and sale is settled by a retry of the transaction or
//     by Sales.Recover (the "comic-purchase-recovery" service). A declined
//     charge leaves nothing behind, so the buyer may try again.
//   - Bloated patterns: lookups are by a pattern's exact values, so a
//     pattern with many subscriptions over
//     many values costs nothing more; what bloats is one value set (say,
//     everyone who asked for {"publisher":"Marvel"}). Past
//     StoreConfig.BloatThreshold members such a set continues in shard
//     "#k", so no single SMEMBERS blocks Redis for long. Store.Stats
//     reports the bloated value sets per pattern and a diversity heuristic
//     per field (top value frequency ÷ total); matching does not
//     need the latter because it looks up every field of the pattern.
//   - Strings match case-insensitively with white space collapsed.
//
// # Redis layout
//
// Subscriptions share the hash tag {comic-subs} (see Store). Everything
// about one comic shares the tag {comic.p} of its partition p (see
// Topics): inventory, generation, job marks, pending notifications,
// notification history, sales and the three streams. On Redis Cluster the
// subscription index is one slot; the matcher never mixes it with comic
// keys in one script.
package comic
