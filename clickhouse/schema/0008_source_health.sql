-- 0008_source_health: the health history of the availability sources
-- (flows/availability, stage avail-health-history).
--
-- One row per health transition of a source: status "down" when it has
-- failed too many runs in a row (its watchers are blind to its openings),
-- "up" when it answers again. event_id is the transition's
-- (avail.EventID of its run), so a redelivered transition collapses into
-- one row on merge; exact counts use uniqExact(event_id) or FINAL. Valid on
-- ClickHouse 18.16 and current releases.
--   blind_since        the source's last good answer before it went down
--   blind_for_seconds  on "up": from blind_since to the run that brought it back
CREATE TABLE IF NOT EXISTS source_health (
    event_id             String,
    source_id            String,
    provider             String,
    status               String,
    run_id               String,
    at                   DateTime,
    at_ms                UInt16,
    consecutive_failures UInt32,
    blind_since          DateTime,
    blind_for_seconds    UInt32,
    error                String,
    trace_id             String
) ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(at)
ORDER BY (source_id, at, event_id);
