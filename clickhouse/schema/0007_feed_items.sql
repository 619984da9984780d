-- 0007_feed_items: the history of feed items (flows/feed).
--
-- One row per step of an item: first_seen, edited, excluded, assigned,
-- delivered (per collection) and cleared. event_id is deterministic
-- ("<feed>:<iid>:<kind>[:<hash>][:<subscribable>:<within>]"), so a
-- redelivered event collapses into one row on merge; exact counts use
-- uniqExact(event_id) or FINAL. Valid on ClickHouse 18.16 and current
-- releases.
CREATE TABLE IF NOT EXISTS feed_item_events (
    event_id     String,
    feed_id      String,
    iid          String,
    guid         String,
    kind         String,
    at           DateTime,
    at_ms        UInt16,
    content_hash String,
    subscribable String,
    within       String,
    trace_id     String
) ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(at)
ORDER BY (feed_id, iid, kind, event_id);
