// Package offer is the sell-offer flow: offers held by several handler
// services, and filter searches answered from a cache of logical results.
//
// A Catalog holds the offers by handler, each with a change stream.
// Flow.Search hashes the canonical filter into a result id; one script
// serves the cached result, joins one being computed, or sends one message
// per handler stage, whose matches complete the result.
//
// Keys of result R in partition p:
//
//	ds:{offer.p}:offer:result:R           main hash
//	ds:{offer.p}:offer:result:R:data      matches by score (sorted set)
//	ds:{offer.p}:offer:result:R:values    match aggregates (hash)
//	ds:{offer.p}:offer:result:R:waiting   waiting handlers (set)
//	ds:{offer.p}:offer:result:R:done      completion notices (stream)
//	ds:{offer.p}:offer:request:R:<id>     a client request id seen
//	ds:{offer.p}:offer:price:<id>         an orderPrice record
//
// Flow.RunFresh invalidates the results and orderPrice records an offer
// change affects; while it lags past Config.FreshBound, searches bypass the
// cache. Standing searches notify their subscriber once per result version.
package offer
