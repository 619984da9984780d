-- 0001_availability: the availability pipeline's history.
--
-- Valid on ClickHouse 18.16 and current releases: no TTL, LowCardinality,
-- DateTime64 or Map. Times are DateTime (seconds, UTC) plus a *_ms column
-- holding the milliseconds. Every table is a ReplacingMergeTree whose
-- ORDER BY ends with the row's deterministic id, so redelivered or replayed
-- rows collapse into one on merge; queries that must be exact before merges
-- use FINAL, uniqExact or argMax (clickhouse.CountRuns and friends).
-- Retention drops whole partitions (ALTER TABLE ... DROP PARTITION).
-- Statements are separated by ";" at the end of a line.

-- One row per poll run (avail.RunRecord). Raw runs are kept for days, so
-- they are partitioned by day. The version column is `applied`: when a run
-- is replayed, its applied row (1) wins over the replay's (0).
CREATE TABLE IF NOT EXISTS runs (
    run_id        String,
    source_id     String,
    provider      String,
    scope_key     String,
    started_at    DateTime,
    started_at_ms UInt16,
    run_at        DateTime,
    run_at_ms     UInt16,
    status        String,
    error         String,
    observed      UInt32,
    opened        UInt32,
    closed        UInt32,
    applied       UInt8,
    trace_id      String
) ENGINE = ReplacingMergeTree(applied)
PARTITION BY toYYYYMMDD(run_at)
ORDER BY (source_id, scope_key, run_at, run_id);

-- One row per transition (avail.Transition), keyed by its deterministic
-- event_id: raw flips (raw = 1), stable confirmations (stable = 1), or both
-- at once when stabilization is 1.
CREATE TABLE IF NOT EXISTS transitions (
    event_id    String,
    run_id      String,
    run_at      DateTime,
    run_at_ms   UInt16,
    kind        String,
    raw         UInt8,
    stable      UInt8,
    baseline    UInt8,
    notify      UInt8,
    entity_key  String,
    entity_kind String,
    provider    String,
    venue       String,
    venue_name  String,
    date        String,
    slot_time   String,
    party_size  UInt16,
    scope_key   String,
    source_id   String,
    last_seen   DateTime,
    trace_id    String
) ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(run_at)
ORDER BY (provider, venue, entity_key, run_at, event_id);

-- One row per availability session (open window), keyed by session_id =
-- avail.SessionID(entity_key, open_run_id). The open row has version 1 and
-- state 'open'; a closed row has closed_at, duration_ms and version
-- 2^48 - closed_at in ms, so it replaces the open row and, of two closed rows,
-- the earlier close wins. All rows of a session carry the same opened_at, so
-- they share a partition.
CREATE TABLE IF NOT EXISTS sessions (
    session_id   String,
    entity_key   String,
    entity_kind  String,
    provider     String,
    venue        String,
    venue_name   String,
    date         String,
    slot_time    String,
    party_size   UInt16,
    scope_key    String,
    source_id    String,
    open_run_id  String,
    close_run_id String,
    opened_at    DateTime,
    opened_at_ms UInt16,
    closed_at    DateTime,
    closed_at_ms UInt16,
    duration_ms  UInt64,
    state        String,
    version      UInt64,
    trace_id     String
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(opened_at)
ORDER BY (provider, venue, entity_key, opened_at, session_id);
