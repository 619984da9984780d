// Package notifier is dropstream's notifier: the part trusted with users'
// inboxes. It holds
//
//   - the generic delivery: every flow publishes Request messages to
//     RequestTopic (notify.requests) with PublishRequests, and the
//     "notifier-deliver" stage (Deliverer) delivers each once per
//     (subscriber, destination, subject, window) through the shared
//     DeliveryLedger, on the subscriber's preferences (package subscriber:
//     include/exclude lists, channel switches, quiet hours in their time
//     zone), throttled per destination and channel (package throttle, which
//     also honours 429 Retry-After), batched into digests (package digest:
//     each, every n, hourly, daily, weekly; quiet hours hold into a digest
//     too; Critical bypasses both), retried with exponential backoff and
//     jitter (RetryConfig: a failed request is filed in a retry schedule
//     in Redis and acknowledged; the "notifier-retries" service appends it
//     back to its stream when due, with its attempt number), then
//     dead-lettered after MaxAttempts (`dropstream dlq replay` sends again,
//     from attempt 1; the ledger skips what was sent), and recorded in the
//     history (package history: Redis recent history, ClickHouse via
//     notify.history and the "notifier-history" stage);
//   - the channels: webhook (HMAC-SHA256 signature with a timestamp, per
//     destination secret), Slack-style webhook, log, and email over SMTP
//     (package email).
//
// Flows that must deliver in process use the same pieces: a Dispatcher
// over the DeliveryLedger and the channels, Settle for a message's
// deliveries, Delivery.HistoryRecord for the history (the availability
// flow's watchers, in flows/avail/watch, do so: their signed body
// is a contract with their receivers, and one hop fewer keeps their
// end-to-end latency).
//
// # Generic delivery keys
//
// The business key of a request to one destination is
// "<flow>:<subscriber id>:<destination id>:<subject>:<window>" (subject
// and window hashed when longer than the ledger allows), in the slot of
// the request's partition; requests are partitioned by subscriber, so
// every request of a subscriber, from any flow, shares one ledger slot. A
// digest's key is "digest:<subscriber>:<destination>:<window id>". The
// notification id receivers and the history see is NotificationID(key).
//
// # Redis layout
//
// Per partition p of notify.requests (tag {notify.p}), the retry
// schedule (see Deliverer.MoveDueRetries):
//
//	ds:{notify.p}:notifier:retry       sorted set: ids of failed request entries, scored by due time (Unix ms)
//	ds:{notify.p}:notifier:retry:msgs  hash: entry id → the entry's fields as a JSON array, notify.attempt raised
package notifier
