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
// Every entry a group can read is accounted for in Redis as it is settled
// (Conservation), and a stage can be paused and resumed in every process
// at once (Control).
//
// A copy acknowledges a long batch as it works through it and keeps the
// rest of it from going stale, so another live copy does not handle its
// messages again. Stopped, a copy finishes the batch in hand within
// HandlerTimeout and starts no retry pause; what it did not settle stays
// pending. Each copy's consumer name is held by a lease in Redis; with
// RunnerConfig.Instance it is stable across restarts, and consumers left
// idle with nothing pending are deleted.
//
// Delivery is at least once. Effects that must happen once are guarded by a
// business key in the Ledger.
package stream
