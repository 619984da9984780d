// Package feed is the feed flow (seed 001, "feedletter"): RSS and Atom
// feeds polled politely, items that must settle before they are sent, and
// subscription definitions that gather items into collections (digests)
// delivered once to confirmed subscribers.
//
// # Pipeline
//
//		Poller ──► feed.polls ──► "feed-assign" ──► feed.collections ──► "feed-deliver" ──► notifier
//		(service)  (a Poll per      observe, assign,    (completed           render, send once,
//		            fetch)          complete: Lua        collections,         release the items
//		                            scripts              confirmations)
//		                 └──────────────── feed.history ──► "feed-history" ──► ClickHouse
//
//	  - The Poller (a service, one per deployment) fetches each feed every
//	    PollEvery with package poll: conditional GET (ETag, Last-Modified),
//	    gzip, bounded size, time and redirects, per-host rate limit and
//	    Retry-After pauses, backoff after failures. Every fetch becomes a Poll
//	    on feed.polls, keyed by feed id; a failed fetch is a Poll with OK
//	    false, never an empty feed: items are never taken for gone (an item
//	    that vanishes from the feed is still delivered from its cached
//	    content, as the seed wants), but time-based assignment and
//	    completion still proceed.
//	  - "feed-assign" applies a Poll in two Lua scripts over the feed's
//	    partition: observe (new items Unassigned with first_seen =
//	    last_checked = stable_since; an Unassigned item whose content hash
//	    changed gets stable_since reset; a Poll older than the newest applied
//	    is dropped), then assign and complete: every assignable item (stable
//	    for AwaitStabilization and MinDelay old, or MaxDelay old) is assigned
//	    to the collection of every subscribable of the feed in one atomic
//	    step and becomes Assigned; every collection that is due (each item:
//	    at once; every n: at the nth; daily/weekly: at the end of its window
//	    in its time zone) is marked completed and appended, with its items'
//	    content, to feed.collections in the same step. Both scripts are
//	    idempotent, so a crash anywhere in the handler redelivers the Poll
//	    and changes nothing twice; time is the Poll's own, so a redelivery
//	    decides what the first delivery decided.
//	  - "feed-deliver" renders each completed collection for each confirmed
//	    subscription (text and HTML templates listing the items with their
//	    links and the unsubscribe link) and sends it once per (collection,
//	    subscription): e-mail and webhook destinations as notifier.Request
//	    messages on notify.requests when Config.Relay is set (the notifier
//	    then sends each once per destination, subject and window, e-mail
//	    over SMTP included), else and for log destinations through a
//	    notifier.Dispatcher and its DeliveryLedger. Then one more idempotent
//	    script releases the collection: each item's pending count drops, and
//	    an item no collection waits for becomes Cleared — its content is
//	    deleted, its guid and content hash kept forever, so a guid that
//	    reappears is never sent again.
//	  - "feed-history" appends the item history (first_seen, edited,
//	    excluded, assigned, delivered, cleared), which the scripts append to
//	    feed.history in the same atomic steps, to ClickHouse
//	    (feed_item_events, deterministic event ids).
//
// # Where this departs from the seed
//
//   - Feed ids derive from the URL, so adding a feed is idempotent.
//   - Items present at a feed's first successful poll are Excluded unless
//     the feed sets IncludeExisting: adding a feed does not mail its archive.
//   - Completed collections are deleted once delivered (the seed kept the
//     latest per subscribable and wondered why); the delivery message
//     carries the items, so nothing is lost if an item is cleared first.
//   - Content of assigned items is frozen: what was assigned is sent.
//   - Subscribable names are scoped by feed (the seed's note), and the
//     destination's unique core (lower-cased bare e-mail address, webhook
//     URL, log name) is unique per subscribable.
//   - Confirmation and unsubscribe use the flow's own random tokens
//     (/v1/feed-links/confirm|unsubscribe?token=…, no API key needed): the
//     messages carrying them travel through the notifier, but the tokens
//     are not the notifier's subscriber tokens.
//
// Known limits: deleting a subscribable leaves its open every-n collection
// (and the pending count of its items) behind, so those items stay
// Assigned; each poll assigns at most Config.AssignLimit items.
package feed
