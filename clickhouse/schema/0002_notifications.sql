-- 0002_notifications: the notifier's history.
--
-- Valid on ClickHouse 18.16 and current releases. One row per record of a
-- notification (its failed tries, then its send, or its hold, batch or
-- suppression); rows of one notification share notification_id, and the
-- version (recorded_at in ms × 8 + the status's rank) makes the newest
-- record win when they collapse on merge. Queries that must be exact
-- before merges use argMax(…, version) grouped by notification_id
-- (clickhouse.SubscriberNotifications). Retention drops whole partitions.

CREATE TABLE IF NOT EXISTS notifications (
    notification_id String,
    flow            String,
    event           String,
    subscriber_id   String,
    destination_id  String,
    channel         String,
    subject         String,
    window_key      String,
    status          String,
    attempts        UInt16,
    critical        UInt8,
    observed_at     DateTime,
    observed_at_ms  UInt16,
    recorded_at     DateTime,
    recorded_at_ms  UInt16,
    latency_ms      UInt64,
    trace_id        String,
    event_id        String,
    run_id          String,
    message_id      String,
    error           String,
    version         UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(recorded_at)
ORDER BY (subscriber_id, notification_id);
