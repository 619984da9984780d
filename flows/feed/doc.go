// Package feed is the feed flow (a feed newsletter): RSS and Atom
// feeds polled politely, items that must settle before they are sent, and
// subscription definitions that gather items into collections (digests)
// delivered once to confirmed subscribers.
//
// # Pipeline
//
//		Poller ──► feed.polls ──► "feed-assign" ──► feed.collections ──► "feed-deliver" ──► notify.requests
//		(service)  (a Poll per      observe, assign,    (completed           render, request    (notifier:
//		            fetch)          complete: Lua        collections)         once, release      once per
//		                            scripts                                   the items          destination)
//		                 └──────────────── feed.history ──► "feed-history" ──► ClickHouse
//
//	  - The Poller (a service; any number of copies share each feed's
//	    schedule through its poll gate, package pollgate) fetches each feed
//	    with package poll: conditional GET (ETag, Last-Modified),
//	    gzip, bounded size, time and redirects, per-host rate limit and
//	    Retry-After pauses, backoff after failures. Etiquette
//	    (EtiquetteConfig): the next poll honours the feed's Cache-Control
//	    max-age or Expires, its RSS <ttl>, <skipHours> and <skipDays>, and
//	    adapts to how often its items arrive (half their median gap, from
//	    the PollEvery until three arrivals are known), every hint capped at
//	    MaxInterval; requests to one host are spaced across every copy
//	    (pollgate.Pacer in Redis); a 301 or 308 updates the feed's URL (its
//	    id stays); a 410, or DeadAfter failures in a row, halts the feed
//	    (gone, dead: no longer polled) and tells its subscribers once. A
//	    feed advertising a WebSub hub is subscribed to it (WebSubConfig):
//	    the hub verifies the intent at WebSubPath+id, pushes signed content
//	    there (HMAC with a per-subscription secret), which becomes a Poll
//	    like a fetch, the lease is renewed before it ends, and the feed is
//	    polled only every Fallback meanwhile. Every fetch becomes a Poll
//	    on feed.polls, keyed by feed id; a failed fetch is a Poll with OK
//	    false, never an empty feed: items are never taken for gone (an item
//	    that vanishes from the feed is still delivered from its cached
//	    content), but time-based assignment and
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
//	    in its time zone; a daily or weekly one early, at
//	    Config.CollectionItems items) is marked completed and appended, with
//	    its items' content, to feed.collections in the same step. An item
//	    never joins a completed collection that waits for its delivery: it
//	    opens the next one of its window ("<within>+2"). Both scripts are
//	    idempotent, so a crash anywhere in the handler redelivers the Poll
//	    and changes nothing twice; time is the Poll's own, so a redelivery
//	    decides what the first delivery decided.
//	  - "feed-deliver" renders each completed collection once (text and
//	    HTML templates listing the items with their links) and hands it to
//	    every confirmed subscription: e-mail and webhook subscriptions are
//	    destinations of notifier subscribers (package notifier/subscriber),
//	    so each gets a notifier.Request on notify.requests, which the
//	    notifier's "notifier-deliver" stage sends once per (destination,
//	    subject, window) on its channels (SMTP e-mail: the request's text,
//	    the subscriber's unsubscribe link and List-Unsubscribe header);
//	    log destinations get the rendered message through a
//	    notifier.Dispatcher and its DeliveryLedger. Subscriptions whose
//	    notifier destination is gone (unsubscribed, expired unconfirmed)
//	    are deleted then. Then one more idempotent script releases the
//	    collection: each item's pending count drops, and an item no
//	    collection waits for becomes Cleared — its content is deleted, its
//	    guid and content hash kept forever, so a guid that reappears is
//	    never sent again.
//	  - "feed-history" appends the item history (first_seen, edited,
//	    excluded, assigned, delivered, cleared), which the scripts append to
//	    feed.history in the same atomic steps, to ClickHouse
//	    (feed_item_events, deterministic event ids).
//
// # Rules
//
//   - Feed ids derive from the URL, so adding a feed is idempotent.
//   - Items present at a feed's first successful poll are Excluded unless
//     the feed sets IncludeExisting: adding a feed does not mail its archive.
//   - Completed collections are deleted once delivered; the delivery message
//     carries the items, so nothing is lost if an item is cleared first.
//     Until then GET .../subscribables/{name}/collections shows them
//     (opened, completed) with the open ones (opened, due).
//   - A collection is bounded: an every-n one by its n, a daily or weekly
//     one by Config.CollectionItems (then cut, its window going on in
//     "<day>+2"), so neither its message nor its e-mail grows without end.
//   - An item without guid, link and title (RSS 0.92 allows an item of a
//     description only) is named by its description and author, not by
//     an empty link and title that every such item would share.
//   - The poller keeps a feed's validators (ETag, Last-Modified) only once
//     its poll is published: a poll lost on the way is fetched again in
//     full, never answered 304 with its items unseen.
//   - Content of assigned items is frozen: what was assigned is sent.
//   - A new item whose Fingerprint (canonical link and content) names an
//     item already seen under another guid is Held: never sent, counted
//     on the feed (FeedStats.HeldDuplicates) and in a metric.
//   - Per-feed figures (requests, share of 304s, bytes, next poll, held
//     duplicates, pushes) live in the feed's record (Flow.Polling, the
//     API's "polling"); metrics carry only bounded labels.
//   - Subscribable names are scoped by feed, and the
//     destination's unique core (lower-cased bare e-mail address, webhook
//     URL, log name) is unique per subscribable.
//   - Confirmation and unsubscribe are the notifier's: Flow.Subscribe
//     makes an e-mail or webhook destination a notifier subscriber
//     (pending; the notifier expires it unconfirmed after its ConfirmTTL)
//     and sends its confirmation request, rendered from the flow's
//     templates, with the notifier's opt-in link (/v1/confirm/<token>: a
//     GET shows a page, a POST confirms). Subscriptions of one destination
//     core to several subscribables share its notifier subscriber: one
//     confirmation confirms them all, and the notifier's unsubscribe link
//     (/v1/unsubscribe/<token>, also the one-click List-Unsubscribe POST)
//     ends them all. An address the notifier holds for a subscriber the
//     flow did not create cannot be subscribed (409).
//   - Deleting a subscribable closes its open collections (an every-n
//     collection short of n, a window not yet due): their items are
//     released undelivered (dropScript). A completed one already on its
//     way is delivered to the subscribable's subscriptions at that time:
//     none, or, when it was defined again meanwhile, the new ones.
//   - A feed has at most MaxSubscribables subscribables (every poll hands
//     them all to the assignment script).
//
// Known limits: each poll assigns at most Config.AssignLimit items (the
// rest wait for the next poll); the token bucket of package poll is per
// copy, but the host spacing of EtiquetteConfig.HostSpacing holds across
// copies; a halted (gone or dead) feed stays halted until Flow.Resume
// (POST /v1/feeds/{id}/resume); the flow never unsubscribes from a hub (a removed
// feed's pushes get 404 until its lease ends);
// a request's text is at most notifier.MaxTextLen bytes, so a long
// collection's plain-text mail lists its first items and counts the rest,
// while its HTML part (the flow's template, notifier.Request.HTML, up to
// notifier.MaxHTMLLen bytes) links many more; a subscriber's notifier
// digest of several collections shows their texts.
package feed
