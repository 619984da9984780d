// Package stream is dropstream's runtime: messages on Redis Streams, a
// consumer-group stage runner, retry and dead-letter semantics, an
// idempotency ledger, safe trimming and trace propagation.
//
// A stage is a Handler over one Topic. The Runner reads the topic's
// partitions through a consumer group in batches, runs each message through
// the middleware chain and settles it by the handler's error:
//
//   - nil: acknowledged;
//   - wrapping ErrDrop: acknowledged and counted as dropped;
//   - Permanent, or any error at the last allowed delivery: moved to the
//     partition's dead-letter stream, then acknowledged;
//   - RetryAfter(err, d): parked for d, then put back for this group only;
//   - Hold(err), from a BatchHandler: kept in hand and handed again later;
//   - any other: left pending, redelivered once idle for ClaimIdle.
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
