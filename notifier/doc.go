// Package notifier delivers every flow's notifications.
//
// Flows publish [Request] messages to notify.requests ([PublishRequests]);
// the "notifier-deliver" stage ([Deliverer]) sends each once per
// (subscriber, destination, subject, window) through the [DeliveryLedger],
// on the subscriber's preferences (package subscriber), throttled (package
// throttle), batched into digests (package digest), retried with backoff
// ([RetryConfig]), dead-lettered after MaxAttempts and recorded in the
// history (package history). Channels: webhook (Standard Webhooks
// signature), Slack-style webhook, log and email (package email). A flow
// that delivers in process uses a [Dispatcher], [Settle] and
// Delivery.HistoryRecord.
//
// A request's ledger key is "<flow>:<subscriber id>:<destination id>:<subject>:<window>"
// in the slot of its partition; a digest's is
// "digest:<subscriber>:<destination>:<window id>". Receivers see
// NotificationID(key). The retry schedule of partition p lives in
// ds:{notify.p}:notifier:retry (sorted set of entry ids by due time, Unix
// ms) and ds:{notify.p}:notifier:retry:msgs (hash: entry id → fields as a
// JSON array).
package notifier
