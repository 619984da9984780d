// Package writer is the writer of the availability pipeline. It reads the
// transition and run streams as three independent consumer groups:
//
//   - "avail-projection" (Projection) keeps the soft state of every entity in
//     Redis: open or closed with its timestamps, its availability sessions,
//     and indexes to list entities by provider, venue, date, party size and
//     state. Nothing is deleted when an entity closes.
//   - "avail-analytics-transitions" and "avail-analytics-runs" (Analytics)
//     append transitions, sessions and runs to ClickHouse in batches: the
//     first the transitions, their sessions and the records of the runs
//     that carry them, the second the records of the runs that flipped
//     nothing.
//
// Because the groups are separate, a ClickHouse outage stalls only the
// analytics groups: their backlog waits in the streams while the projection
// stays current.
//
// # Redis key layout
//
// Every key of partition p carries the hash tag {avail.p} of the transition
// stream it is written from (p is the message's partition, that of its scope
// key), so one Lua script updates an entity's hash, sessions and indexes
// atomically, also on Redis Cluster. Times are Unix milliseconds.
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
//	    scored by run time in ms, each "run id, open|close, trace id", added
//	    once per (run, kind), the newest 2 × ProjectionConfig.MaxSessions
//	    kept. Sessions are paired from it when read (an open starts a
//	    session, the flip right after it closes it if it is a close), so
//	    they are the same whatever order the flips arrived in.
//	ds:{avail.p}:entities:all           sorted set, every entity key
//	ds:{avail.p}:entities:open          sorted set, entities now open
//	ds:{avail.p}:entities:closed        sorted set, entities now closed
//
// Keys of entities with a date expire RetainAfterDate (7 days) after the end
// of that date; their index entries are removed by List and Sweep.
//
// The index sets hold members with score 0, so they are ordered by entity key
// (provider|venue|date|time|party) and ZRANGEBYLEX reads a provider, a venue
// or a venue's date as one contiguous range in O(log n + page). List merges
// the P partitions' ranges in key order (one pipelined round trip per page
// step), checks the remaining filters (party size, or fields that do not form
// a key prefix) on the key itself, and reads the hashes of the page only. A
// page therefore costs O(P × page) index entries, whatever the number of
// entities; a filter that is not a key prefix scans at most
// ProjectionConfig.MaxScan entries per call and may return a short page with
// a cursor to continue.
//
// Memory, measured on Redis 7.0 (hash and flip history, without index
// entries): about 1.0 KB per entity with one session, 2.4 KB with 10, and
// about 34 KB at the cap of 100 sessions.
//
// # Idempotence
//
// The projection applies each transition in one script. A flip already in
// the entity's history (same run and kind) changes nothing. Every field of
// the entity's hash is newest-wins, earliest or latest by (run time, run id),
// and sessions are derived from the history, so the projection ends the same
// whatever order redeliveries bring the transitions in; a flip older than the
// newest joins the history without changing the current state. ClickHouse rows carry deterministic ids (event id, run id, session id
// with a version) in ReplacingMergeTree tables, so redelivered batches collapse;
// exact counts use clickhouse.CountTransitions, CountRuns and CountSessions.
package writer
