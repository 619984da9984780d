// Package watch is the availability flow's watchers: subscriptions to
// availability openings kept in Redis with a match index (Store), and the
// "avail-notifier" stage (NewStage), which notifies each matching watcher of
// every stable opening once per open window.
//
// The stage delivers in process, through the notifier's Dispatcher and
// delivery ledger: its business key and signed OpenEvent body are a
// contract with receivers, and one hop fewer keeps latency low. It records
// each delivery in the notifier's history (Config.History) with the
// transition and run that caused it.
//
// # Once per open window
//
// The business key of a delivery is "avail:<watcher id>:<event id of the
// stable open>". The diff emits one stable open per open window and applies
// each run once, so the key is the same on every redelivery or replay, and a
// later window gets a new key. It depends on no notifier state, so
// out-of-order handling cannot send twice. The session id in the payload
// comes from the raw flips the stage records; when the raw open was not
// seen it is empty and dropstream.notifier.sessions.unresolved counts it.
//
// # Other notices
//
// Each goes through the same ledger, once per business key:
//   - "availability.provisional" (Watcher.Provisional) on a raw open, and
//     "availability.retracted" if the window closes before a stable open.
//   - "availability.gone" (Watcher.NotifyGone) on the stable close of a
//     window the watcher was told.
//   - "availability.source_down" and "availability.source_up" when a
//     source serving the watcher's scopes changes health (unless
//     Watcher.MuteSourceHealth).
//
// Paused watchers hear only retractions. Windows filter the slot's time;
// RearmAfterMinutes skips a window that began soon after the last closed.
//
// # Delivery
//
// The notifier.DeliveryLedger takes a leased "sending" record before each
// send, turns it into "sent" after, and releases it on a retryable
// failure, so the message's redelivery sends again. A 4xx is recorded as
// "rejected" and the message is dead-lettered once nothing retryable is
// left. Delivery is at least once (twice only when a process dies
// mid-send), so receivers dedupe on (watcher_id, event_id).
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
