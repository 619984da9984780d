// Package watch is the availability flow's watchers: subscriptions to
// openings kept in Redis with a match index (Store), and the
// "avail-notifier" stage (NewStage), which tells each matching watcher of
// every stable opening once per open window, in process through the
// notifier's Dispatcher and delivery ledger (one hop fewer, low latency).
//
// A delivery's business key is "avail:<watcher id>:<event id of the stable
// open>": redeliveries share it and a later window gets a new one. The other
// notices (the Event* constants) use the same ledger. Paused watchers hear
// only retractions. Delivery is at least once: receivers dedupe on
// (watcher_id, event_id).
//
// Redis layout; watchers share the tag {notifier}, so one script creates a
// watcher and its index entry atomically:
//
//	ds:{notifier}:watcher:<id>                        string: the watcher JSON
//	ds:{notifier}:watchers                            sorted set: every id
//	ds:{notifier}:match:slot:<entity key>             set: slot watchers
//	ds:{notifier}:match:venue:<provider>|<venue>      set: venue watchers
//	ds:{notifier}:match:provider:<provider>           set: provider-wide watchers
//	ds:{notifier}:match:slotvenue:<provider>|<venue>  set: the venue's slot watchers
//
// Per partition p of the transitions topic (tag {avail.p}):
//
//	ds:{avail.p}:notifier:events:<entity key>   sorted set: raw flips by run_at
//	ds:{avail.p}:notifier:prov|told:<entity>    hash: watcher id → provisional, told event id
//	ds:{src.<source id>}:notifier:blind         hash: since_ms, up_ms, blind_s, grace_ms
//	ds:{avail.p}:ledger:notifier:avail:<watcher id>:<event id>  the notifier.DeliveryRecord
package watch
