// Package comic is the comic flow: a comic marketplace with a published
// Comic JSON Schema, email subscriptions to partial comics, intake into
// inventory, notification jobs as stream stages, and purchases where
// exactly one buyer of a comic wins.
//
// A comic's id is the first 128 bits of the SHA-256 of its canonical form
// (sorted keys, defaults filled, no white space). A subscription's id
// derives from (lower-cased email, canonical body).
//
// A subscription body constrains some fields: each to a value (strings
// case-folded, white space collapsed) or, for grade, issue, price_cents
// and year, to an inclusive range {"gte": x, "lte": y} (see Range). Each
// subscription sits in one index, keyed by its SearchPattern and the hash
// of its exact values; matching reads only the active patterns, one read
// each, and never loads a subscription (see Store and Matcher).
//
// Guarantees:
//   - Intake is one Lua script: inventory, generation, job and "listed"
//     event, or nothing. A comic already listed answers created=false.
//   - The matcher ("comic-matcher") enters the matches in a per-listing
//     lottery in chunks; a copy killed between chunks leaves a prefix that
//     the next copy completes.
//   - Delivery ("comic-delivery") notifies each email at most once per
//     comic.
//   - Holds: matches are told in waves; only the wave told last may buy
//     while its hold lasts, and the next wave is told once when it ends
//     unsold (see Holds).
//   - Purchase is a saga keyed by the transaction id: exactly one buyer
//     wins, losers are refunded (see Sales).
//
// Subscriptions share the hash tag {comic-subs}; everything about one
// comic shares the tag {comic.p} of its partition p. No script mixes the
// two.
package comic
