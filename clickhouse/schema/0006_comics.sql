-- 0006_comics: the comic flow's history (flows/comic).
--
-- Valid on ClickHouse 18.16 and current releases: no TTL, LowCardinality,
-- DateTime64 or Map. Times are DateTime (UTC seconds) plus *_ms. Rows carry
-- deterministic ids, so redelivered events collapse on merge; exact queries
-- use FINAL or argMax. Statements are separated by ";" at the end of a line.

-- One row per event of the comic flow's events topic: listed, notified,
-- sold, forgotten (a refunded buyer's notification removed). event_id is
-- "<kind>:<comic id>:<gen>:<email or txn>".
CREATE TABLE IF NOT EXISTS comic_events (
    event_id        String,
    kind            String,
    comic_id        String,
    gen             UInt32,
    at              DateTime,
    at_ms           UInt16,
    email           String,
    subscription_id String,
    txn_id          String,
    price_cents     Int64,
    publisher       String,
    series          String,
    title           String,
    issue           String,
    year            UInt16,
    grade           Float32,
    key_issue       UInt8,
    trace_id        String
) ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(at)
ORDER BY (comic_id, gen, kind, event_id);

-- A comic's time in inventory is an availability session: one per
-- (comic, gen), opened by "listed" (closed = 0) and closed by "sold"
-- (closed = 1, the version that wins).
CREATE TABLE IF NOT EXISTS comic_sessions (
    session_id    String,
    comic_id      String,
    gen           UInt32,
    opened_at     DateTime,
    opened_at_ms  UInt16,
    closed_at     DateTime,
    closed_at_ms  UInt16,
    closed        UInt8,
    publisher     String,
    series        String,
    title         String,
    issue         String,
    year          UInt16,
    grade         Float32,
    key_issue     UInt8,
    price_cents   Int64,
    buyer         String,
    txn_id        String,
    trace_id      String
) ENGINE = ReplacingMergeTree(closed)
PARTITION BY toYYYYMM(opened_at)
ORDER BY (comic_id, gen);

-- Snapshots of the subscription statistics, one row per pattern (kind
-- 'pattern', name = the SearchPattern) or field (kind 'field', with its
-- diversity) per minute.
CREATE TABLE IF NOT EXISTS comic_pattern_stats (
    at            DateTime,
    kind          String,
    name          String,
    subscriptions Int64,
    distinct_values Int64,
    top_value     String,
    top_count     Int64,
    diversity     Float64
) ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(at)
ORDER BY (kind, name, at);
