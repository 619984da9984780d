// Package feed is the feed flow, a feed newsletter: RSS and Atom feeds are
// polled politely, new items wait until they settle, and subscribables
// gather them into collections (digests) sent once to confirmed
// subscribers.
//
// # Pipeline
//
//		Poller ──► feed.polls ──► "feed-assign" ──► feed.collections ──► "feed-deliver" ──► notify.requests
//		                 └──────────────── feed.history ──► "feed-history" ──► ClickHouse
//
//	  - The Poller (a service; its copies share each feed through its poll
//	    gate, package pollgate) fetches each feed with package poll
//	    (conditional GET, bounded size and time, per-host pacing, backoff).
//	    EtiquetteConfig sets when the next poll is due: cache headers, RSS
//	    ttl and skip hints, and how often items arrive, capped at
//	    MaxInterval. A 301 or 308 moves the feed; a 410, or DeadAfter
//	    failures in a row, halts it and tells its subscribers once. A feed
//	    with a WebSub hub is subscribed to it (WebSubConfig) and its pushes
//	    become polls. Every fetch, failed ones included, is a Poll on
//	    feed.polls: a failed fetch never takes items for gone.
//	  - "feed-assign" applies a Poll in two idempotent Lua scripts: observe
//	    records new and edited items, then assign and complete assigns every
//	    settled item (stable for AwaitStabilization and MinDelay old, or
//	    MaxDelay old) to the collections of the feed's subscribables and
//	    publishes the collections that are due. The Poll's own time is used,
//	    so a redelivery decides what the first delivery decided.
//	  - "feed-deliver" renders each completed collection once and hands it
//	    to every confirmed subscription: e-mail and webhook subscriptions
//	    are notifier subscribers and get a notifier.Request; log
//	    destinations go through a notifier.Dispatcher. A last script
//	    releases the collection: an item no collection waits for is Cleared
//	    (content deleted, guid and hash kept, so it is never sent again).
//	  - "feed-history" appends the item history to ClickHouse
//	    (feed_item_events, deterministic event ids).
//
// # Rules
//
//   - Feed ids derive from the URL, so adding a feed is idempotent.
//   - Items present at a feed's first poll are Excluded unless the feed
//     sets IncludeExisting.
//   - What was assigned is sent: assigned content is frozen, and the
//     delivery message carries the items.
//   - A collection is bounded: every-n by n, daily and weekly by
//     Config.CollectionItems.
//   - The poller keeps a feed's validators (ETag, Last-Modified) only once
//     its poll is published, so a lost poll is fetched again in full.
//   - A new item whose Fingerprint matches an item seen under another guid
//     is Held: never sent, counted in FeedStats.HeldDuplicates.
//   - Confirmation and unsubscribe are the notifier's (see Flow.Subscribe).
//   - Deleting a subscribable releases the items of its open collections
//     undelivered.
//   - A feed has at most MaxSubscribables subscribables.
//
// Known limits: each poll assigns at most Config.AssignLimit items; a
// halted feed stays halted until Flow.Resume; the flow never unsubscribes
// from a hub; a request's text is at most notifier.MaxTextLen bytes, so a
// long collection's text lists its first items and counts the rest.
package feed
