// Package offer is the sell-offer flow: sell offers held by several handler
// services, and filter requests answered from a cache of logical results.
//
// A Catalog holds the SellOffers index (offer id → handler tag), each
// handler's offers, and per handler a version counter and a change stream
// its stage follows to keep an in-memory view. Catalog keys carry the hash
// tag {offer.catalog}.
//
// Flow.Search hashes the canonical filter into the result id. One script
// then serves a complete result from the cache (hit), joins one still
// processing (join), or resets it and sends one message per handler to its
// fan-out stream (miss). A client request id seen before starts nothing.
// Each handler stage ("offer-handler-<tag>") writes its matches and leaves
// the waiting set; scripts check the result's generation, so a redelivery
// changes nothing. The last handler marks the result complete and notifies
// the waiting searches, which wait at most MaxWait.
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
// The freshness keeper (Flow.RunFresh, service "offer-fresh") invalidates
// the live results and orderPrice records an offer change affects; while it
// lags more than Config.FreshBound, searches and Flow.OrderPrice bypass the
// cache. Standing searches (Flow.CreateStanding) notify their subscriber
// once per result version. The "offer-history" stage writes every search
// to ClickHouse.
package offer
