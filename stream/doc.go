// Package stream is dropstream's runtime: messages on Redis Streams, a
// consumer-group stage runner, retry and dead-letter semantics, an
// idempotency ledger, safe trimming and trace propagation.
//
// A stage is a Handler over messages of one Topic. The Runner reads the
// topic's partitions through a consumer group in batches, runs every message
// through the middleware chain (tracing, metrics, logging, dead-letter,
// retry, timeout, recovery) and then settles it:
//
//   - nil: the message is acknowledged;
//   - an error wrapping ErrDrop: acknowledged and counted as dropped;
//   - a Permanent error, or any error at the last allowed delivery: moved
//     to the partition's dead-letter stream with its reason, then acknowledged;
//   - RetryAfter(err, d): parked aside for d and then put back on the
//     stream, for this group only, while the partition's next messages
//     flow (see delay.go);
//   - Hold(err), from a BatchHandler whose sink does not answer: kept in
//     hand, fresh, and handed to the handler again after a pause until it
//     settles otherwise (see Hold);
//   - any other error: left pending, and delivered again once it has been
//     idle for ClaimIdle (to this consumer or another copy).
//
// Every entry a group can read is accounted for as it is settled
// (Conservation); a stage can be paused in every process at once
// (Control). A copy keeps a long batch in hand fresh and acknowledges it as
// it goes; stopped, it finishes the batch within HandlerTimeout. Consumer
// names are held by a lease, stable across restarts with
// RunnerConfig.Instance.
//
// Delivery is at least once. Effects that must happen once are guarded by a
// business key in the Ledger.
package stream
