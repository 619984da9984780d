// Package comic is the comic flow: a comic marketplace with a published
// Comic JSON Schema, email subscriptions to partial comics, intake into
// inventory, notification jobs as stream stages, and purchases where exactly
// one buyer of a comic wins.
//
// # Identity
//
// A comic's canonical form is its JSON with sorted keys, defaults filled
// (variant "", printing 1, key_issue false), no white space and grades as
// the CGC decimal; its id is the first 128 bits of the form's SHA-256. A
// subscription's id derives from (lower-cased email, canonical body).
//
// # Matching
//
// A subscription body gives each field it constrains a value, matched
// exactly (strings case-folded, white space collapsed), or, for grade,
// issue, price_cents and year, a range {"gte": x, "lte": y} (either bound
// or both, inclusive, within the field's limits; grades in tenths). An
// issue range compares the leading number ("12A" is 12) and
// matches its "suffix" ("A"; "" by default) exactly. The canonical form
// of a range holds both bounds.
//
// A SearchPattern is the sorted, comma-joined tokens of a body: a field's
// name, or for a range "name>=" (indexed by its lower bound) or "name<="
// (only an upper bound, indexed by it). Each subscription is in one index
// keyed by its pattern and the hash of its exact values (and an issue
// range's suffix): a set of ids for an exact pattern; for a ranged one a
// sorted set of "id|lo:hi..." (the bounds of each ranged field) scored by
// the first ranged field's indexed bound, so a comic reads only the
// members its value reaches and filters them by their other bounds. An
// index past StoreConfig.BloatThreshold continues in shards "#k".
// Matching reads only the patterns that have subscriptions, one read each,
// and never loads a subscription. The matcher caches the active patterns
// and shards under a version the subscription scripts bump.
//
// # Guarantees
//
//   - Intake is one Lua script: inventory, generation, the job and the
//     "listed" event, or nothing. A comic already listed answers
//     created=false.
//   - The "comic-matcher" group reads jobs; a dead copy's job is claimed
//     after ClaimIdle. The matcher hands matched ids off in chunks, each
//     entered in the lottery once, so a copy killed between chunks leaves
//     a prefix and the next copy enters the rest and tells the first wave.
//   - Delivery ("comic-delivery") skips every email already in the comic's
//     notification history, delivers the rest through notifier.Dispatcher
//     (or the notifier's request path) and records the history, so nobody
//     is notified twice for one comic.
//   - Holds (see Holds): the matches are ordered by a per-listing lottery
//     and told in waves of HoldConfig.WaveSize. The wave told last holds
//     the comic for its window (the listing's, else HoldConfig.Window)
//     from its last send (a relayed one's as "comic-hold-sent" reads it
//     in the notifier's history); only its holders, by their
//     notification's hold_token, may begin a purchase. When the hold
//     ends unsold, the "comic-hold-waves" service tells the next wave,
//     once (one script per wave, keyed by the hold's end); never once the
//     comic is sold.
//   - Purchase is a saga keyed by the transaction id: a purchase record,
//     the charge (through the checkout saga), then one script that removes
//     the comic from inventory and records the sale, or marks the purchase
//     refunding. Losers are refunded and their notification record removed.
//     Sales.Recover (service "comic-purchase-recovery") settles interrupted
//     purchases.
//
// # Redis layout
//
// Subscriptions share the hash tag {comic-subs} (see Store). Everything
// about one comic shares the tag {comic.p} of its partition p (see Topics).
// No script mixes the two.
package comic
