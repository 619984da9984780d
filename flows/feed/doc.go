// Package feed is the feed newsletter flow: RSS and Atom feeds are polled
// politely, new items wait until they settle, and subscribables gather them
// into collections (digests) sent once to confirmed subscribers.
//
//	Poller ──► feed.polls ──► "feed-assign" ──► feed.collections ──► "feed-deliver" ──► notify.requests
//	                 └──────── feed.history ──► "feed-history" ──► ClickHouse
//
// The Poller fetches each feed when due (package poll; one copy a feed
// through package pollgate) and publishes every fetch, failed ones too, as
// a Poll. EtiquetteConfig sets the next poll from cache headers, RSS hints
// and arrival rate. A 301 or 308 moves a feed; a 410 or DeadAfter failures
// halt it. A WebSub hub's pushes become polls. "feed-assign" runs two
// idempotent Lua scripts at the Poll's time: observe new and edited items,
// then assign settled items to collections and publish the due ones.
// "feed-deliver" renders each collection once and sends it to every
// confirmed subscription, then clears items no collection waits for (guid
// and hash kept, so an item is never sent twice).
//
// Rules: feed ids derive from the URL; items present at the first poll are
// Excluded unless IncludeExisting; assigned content is frozen; collections
// are bounded (n, or Config.CollectionItems); validators are kept only once
// the poll is published; an item whose Fingerprint matches another guid is
// Held; deleting a subscribable releases its open collections' items.
//
// Known limits: a poll assigns at most Config.AssignLimit items; a halted
// feed stays halted until Flow.Resume; hubs are never unsubscribed from.
package feed
