// Package writer is the writer of the availability pipeline. It reads the
// transition and run streams as three consumer groups:
//
//   - "avail-projection" (Projection) keeps each entity's state, sessions
//     and indexes in Redis.
//   - "avail-analytics-transitions" and "avail-analytics-runs" (Analytics)
//     append transitions, sessions and runs to ClickHouse in batches.
//
// A ClickHouse outage stalls only the analytics groups.
//
// # Redis key layout
//
// Every key of partition p carries the hash tag {avail.p}, so one script
// updates an entity atomically. Times are Unix milliseconds.
//
//	ds:{avail.p}:entity:<entity key>    hash: the entity's projection
//	    state           open | closed (raw transitions only)
//	    first_seen_at   first time the entity was seen open
//	    opened_at       start of the current (or last) open window
//	    closed_at       end of the last open window
//	    last_seen_at    last time a run saw it open
//	    last_run        run id of the last applied raw transition
//	    last_run_at     that run's time: the last-writer-wins clock
//	    last_event      event id of the last applied raw transition
//	    session_id      current (or last) session, avail.SessionID
//	    open_run        run id that opened that session
//	    kind provider venue venue_name date time party_size scope_key
//	    source_id       the entity's attributes
//	    trace_id        trace of the last applied raw transition
//	    stable_state    open | closed, from stable transitions
//	    stable_at, stable_run, stable_event   the last applied stable one
//	ds:{avail.p}:sessions:<entity key>  sorted set: the entity's raw flips
//	    by run time in ms, "run id, open|close, trace id", the newest
//	    2 × ProjectionConfig.MaxSessions kept; sessions are paired on read
//	ds:{avail.p}:entities:all           sorted set, every entity key
//	ds:{avail.p}:entities:open          sorted set, entities now open
//	ds:{avail.p}:entities:closed        sorted set, entities now closed
//
// Keys of entities with a date expire RetainAfterDate after that date.
//
// The index sets score every member 0, so ZRANGEBYLEX reads a provider, a
// venue or a venue's date as one range. List merges the partitions' ranges
// in key order and reads only the page's hashes; a filter that is not a
// key prefix scans at most ProjectionConfig.MaxScan entries per call.
// An entity takes about 1.0 KB with one session and 34 KB with 100
// (Redis 7.0).
//
// ClickHouse rows carry deterministic ids in ReplacingMergeTree tables, so
// redelivered batches collapse.
package writer
