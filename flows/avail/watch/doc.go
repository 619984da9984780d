// Package watch is the availability flow's watchers: subscriptions to
// availability openings kept in Redis with a match index (Store), and the
// "avail-notifier" stage (NewStage), which matches the stable transitions
// of the diff against the watchers and notifies each of every opening once
// per open window.
//
// The stage delivers in process, through the notifier's Dispatcher and
// delivery ledger, rather than publishing to notify.requests: its business
// key and signed OpenEvent body are a contract with its receivers (see
// below), and one hop fewer keeps its end-to-end latency. It records its
// deliveries in the notifier's history (Config.History) with the
// transition and run that caused them, for GET /v1/notifications/{id}/why.
//
// # Once per open window
//
// The diff emits, per entity, raw flips and stable transitions on the
// transitions stream, in order within a scope's partition. A session (open
// window) is named avail.SessionID(entity key, run id of the raw open that
// began it), but the stable open that confirms it carries only its own run
// id.
//
// The business key of a delivery is therefore (watcher id, stable open):
// "avail:<watcher id>:<avail.EventID(stable run id, entity key, open, true)>",
// recomputed from the transition rather than read from it. It is sound
// because stable opens and notified windows are in one-to-one
// correspondence: the diff emits a stable open only when an entity's stable
// state flips from closed to open; it can flip back only after k runs
// observed it closed, which ends the raw window; and the diff applies a run
// once, so a run's event id is emitted once. Hence a window holds at most
// one stable open, a stable open belongs to exactly one window, and the
// key is the same on every redelivery, publish-twice or dead-letter replay
// of the transition. A later window of the same entity is confirmed by a
// later run: a new key, a new delivery. Flapping windows that never become
// stable notify nobody. Because the key does not depend on any state the
// notifier keeps, out-of-order handling cannot make it send twice.
//
// The session id in the payload comes from the flips the notifier records
// itself (raw flips travel on the same stream): the newest raw flip of the
// entity at or before the stable open's run must be an open, and its run
// names the session. When that open was not seen (the group started after
// the stream was trimmed, or it is still pending), the notification goes
// out with an empty session_id and dropstream.notifier.sessions.unresolved
// counts it; deduplication is unaffected.
//
// # What else a watcher may hear
//
// Every notice goes through the same ledger, once per business key:
//   - "availability.provisional" (Watcher.Provisional) on a raw open, key
//     "<watcher>:<raw open event id>"; if the window's raw close comes
//     before a stable open confirmed it, "availability.retracted" follows,
//     key "<watcher>:retract:<provisional event id>". The watchers told are
//     kept in the entity's "prov" hash; a stable open records the session
//     it confirmed there, so a replayed raw open cannot lead to a
//     retraction of a confirmed window.
//   - "availability.gone" (Watcher.NotifyGone) on the stable close of a
//     window the watcher was told, key "<watcher>:gone:<stable close event
//     id>"; the told watchers are kept in the entity's "told" hash.
//   - "availability.source_down" and "availability.source_up" when a source
//     serving the watcher's scopes (Store.ServedBy over Config.Sources)
//     goes down or comes back, key "<watcher>:source:<source id>:<run id>"
//     (unless Watcher.MuteSourceHealth). The stage keeps the source's last
//     blind period; a stable open whose window began after the source went
//     blind and within two poll intervals of its recovery carries
//     blind_for_seconds and a text.
//
// Paused watchers hear none of these but retractions. Windows filter what
// matches (the slot's time); RearmAfterMinutes skips a window that began
// less than N minutes after the previous one closed (raw flips).
//
// # Delivery
//
// Each (watcher, stable open) goes through the notifier.DeliveryLedger in two
// phases: a "sending" record with a lease (notifier.DeliveryLedgerConfig.Lease) is
// taken before the send, turned into "sent" (kept for TTL) after it, and
// released when the send fails retryably, so the message's redelivery (the
// runtime retries with backoff, then dead-letters after MaxDeliveries)
// sends again. A message matching several watchers fails as a whole, but
// the watchers already served are skipped when it comes back. A permanent
// refusal (4xx) is recorded as "rejected" for that stream message, so its
// redeliveries do not hammer the receiver, and the message is dead-lettered
// with the reasons once nothing retryable is left; replaying it tries the
// refused watchers again and skips the served ones. A process that dies
// mid-send leaves a lease that expires before the message is claimed again
// (Lease < ClaimIdle): delivery is at least once, and twice only then, so
// receivers dedupe on (watcher_id, event_id).
//
// # Redis layout
//
// Watchers share the hash tag {notifier}, so one script creates a watcher
// and its index entry atomically (also on Redis Cluster, in one slot):
//
//	ds:{notifier}:watcher:<id>                    string: the watcher as JSON, secret included
//	ds:{notifier}:watchers                        sorted set, score 0: every id (paging by id)
//	ds:{notifier}:match:slot:<entity key>         set: ids of watchers of that exact slot
//	ds:{notifier}:match:venue:<provider>|<venue>  set: ids of venue watchers (no slot)
//	ds:{notifier}:match:provider:<provider>       set: ids of provider-wide watchers
//	ds:{notifier}:match:slotvenue:<provider>|<venue> set: ids of slot watchers of the venue
//	    (a second entry, for Store.ServedBy; slot watchers created before it
//	    are not in it until updated)
//
// A watcher is filed under its most specific constraint only, so matching
// an entity is one SUNION of its three sets, then one MGET of the
// candidates, whose date range and party sizes are checked in Go.
//
// Per partition p of the transitions topic (tag {avail.p}, that of the
// transition's scope key):
//
//	ds:{avail.p}:notifier:events:<entity key>     sorted set: the entity's last raw
//	    flips, score run_at ms, member "<run id>\x00open|close"; expires
//	    Config.WindowTTL after the last one
//	ds:{avail.p}:notifier:prov:<entity key>     hash: watcher id → provisional event id, "~confirmed" → session
//	ds:{avail.p}:notifier:told:<entity key>     hash: watcher id → open event id (gone notices)
//	ds:{src.<source id>}:notifier:blind         hash: since_ms, up_ms, blind_s, grace_ms
//	ds:{avail.p}:ledger:notifier:avail:<watcher id>:<event id>
//	    string: the notifier.DeliveryRecord (JSON, state sending|sent|rejected);
//	    expires after the lease (sending) or notifier.DeliveryLedgerConfig.TTL
package watch
