// Package offer is the sell-offer flow: sell offers held by
// several handler services, and complex filter requests answered from a
// cache of logical results.
//
// Offers live in a Catalog: the SellOffers index (offer id → handler tag),
// each handler's offers, and per handler a version counter and a change
// stream that the handler stages follow to keep an in-memory view of their
// own offers. Every catalog key carries the hash tag {offer.catalog}.
//
// A search (Flow.Search) hashes the canonical form of its filter into
// the logical result id. One script (beginScript) then decides, atomically:
// a complete, unexpired result is served from the cache (hit); a result
// still processing is joined (join), so concurrent identical requests
// compute once; otherwise (miss) the result is reset to processing with a
// new uniqueRequestId, every handler is put in its waiting set, and one
// message per handler is appended to the handler's fan-out stream
// (offer.eval-<tag>), keyed by the result id so that stream, like every
// key of the result, carries the hash tag of the result's partition. A
// client request id seen before never starts a second computation (seen).
//
// Each handler stage ("offer-handler-<tag>") evaluates the filter over its
// own offers and, in one pipeline of scripts, writes its matches
// (LogicalResultsData) and removes itself from the waiting set; the scripts
// check the result's generation and the handler's membership, so a
// redelivered message (a handler copy that died mid-batch, its pending
// entries claimed by another copy) changes nothing. Whoever empties the
// waiting set marks the result complete, sets its expiry (ResultTTL) and
// appends to the result's completion stream, on which waiting searches
// block (XREAD BLOCK) for at most MaxWait before answering "processing".
//
// Redis keys of result R in partition p ({offer.p}):
//
//	ds:{offer.p}:offer:result:R           LogicalResultsMain (hash)
//	ds:{offer.p}:offer:result:R:data      matches by score (sorted set)
//	ds:{offer.p}:offer:result:R:values    match aggregates (hash)
//	ds:{offer.p}:offer:result:R:waiting   waiting handlers (set)
//	ds:{offer.p}:offer:result:R:done      completion notices (stream)
//	ds:{offer.p}:offer:request:R:<id>     a client request id seen
//	ds:{offer.p}:offer:price:<id>         an orderPrice record
//	ds:{offer.p}:offer:prices             live orderPrice records (sorted set)
//	ds:{offer.catalog}:offer:translate:<fromType>_<fromId>_<toType>
//
// The orderPrice cache (Flow.OrderPrice) and the TranslateIds cache
// (Catalog.Translate) have their own TTLs. Results stay fresh: the
// freshness keeper (Flow.RunFresh, service "offer-fresh") follows the
// change streams and invalidates every live result (ds:{offer.p}:offer:live)
// an offer change affects, and a search bypasses the cache while a change
// older than Config.FreshBound is not applied. orderPrice records are kept
// fresh the same way, within the same bound: the keeper deletes every live
// record (ds:{offer.p}:offer:prices) whose order holds a changed offer, and
// Flow.OrderPrice bypasses the cache while the keeper lags. A search's
// sellOfferQuantityLocationIdCombinations element prices each combination
// from the orderPrice record of that one-line order when one reflects the
// result's epoch (usePriceCache). Standing searches
// (Flow.CreateStanding) are re-evaluated on each change and notify their
// subscriber through the notifier once per result version.
//
// Every search is recorded, off the request path, on the offer.history
// topic; the "offer-history" stage writes it to ClickHouse.
package offer
