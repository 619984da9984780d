-- 0005_rollups: rollups of the availability history (0001), the notifier's
-- history (0002) and the checkout attempts (0003) for the dashboards and
-- /v1/stats.
--
-- Valid on ClickHouse 18.16 and current releases. Each rollup is an
-- AggregatingMergeTree filled by a materialized view from the raw table it
-- summarizes; dashboards and the stats API read the rollups only, through
-- the -Merge functions (clickhouse/rollups.go, clickhouse/stats.go).
--
-- Counts are exact even though the raw tables may receive a row twice (a
-- redelivered batch): they are uniqExact states over the row's deterministic
-- id (event_id, run_id, session_id, notification_id, order_id/tr_num), so
-- a duplicate adds nothing. Sums and quantiles (durations, revenue) are over
-- rows as inserted: a duplicated row weighs twice until `dropstream rollups
-- rebuild` recomputes the partition from the raw table.
--
-- Every rollup is partitioned by month of its time column, so retention
-- drops whole partitions (clickhouse/retention.go) and a rebuild replaces one
-- month at a time. Materialized views only see rows inserted after they
-- exist: `dropstream rollups rebuild` backfills older rows.

-- Per flow, scope and hour: opens, closes, stable opens and closes from the
-- transitions table (flow 'avail', the name of its topics and of its
-- metrics), notifications sent from the notifications table (below). Venue
-- and provider come with the scope (a scope belongs to one venue of one
-- provider). ClickHouse 18.16 wants every
-- column from a view into a table, so each view fills the columns it does
-- not count with an empty state (uniqExactIfState(id, 0), maxState('')).
CREATE TABLE IF NOT EXISTS rollup_flow_hourly (
    flow               String,
    hour               DateTime,
    scope_key          String,
    provider           String,
    venue              String,
    venue_name         AggregateFunction(max, String),
    opens              AggregateFunction(uniqExactIf, String, UInt8),
    closes             AggregateFunction(uniqExactIf, String, UInt8),
    stable_opens       AggregateFunction(uniqExactIf, String, UInt8),
    stable_closes      AggregateFunction(uniqExactIf, String, UInt8),
    notifications_sent AggregateFunction(uniqExactIf, String, UInt8)
) ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(hour)
ORDER BY (flow, hour, scope_key, provider, venue);

CREATE MATERIALIZED VIEW IF NOT EXISTS rollup_flow_hourly_transitions_mv TO rollup_flow_hourly AS
SELECT
    'avail' AS flow,
    toStartOfHour(run_at) AS hour,
    scope_key,
    provider,
    venue,
    maxState(venue_name) AS venue_name,
    uniqExactIfState(event_id, toUInt8(kind = 'open' AND raw = 1)) AS opens,
    uniqExactIfState(event_id, toUInt8(kind = 'close' AND raw = 1)) AS closes,
    uniqExactIfState(event_id, toUInt8(kind = 'open' AND stable = 1)) AS stable_opens,
    uniqExactIfState(event_id, toUInt8(kind = 'close' AND stable = 1)) AS stable_closes,
    uniqExactIfState(event_id, toUInt8(0)) AS notifications_sent
FROM transitions
GROUP BY flow, hour, scope_key, provider, venue;

-- Per day (of opened_at), provider and venue: availability sessions. A
-- session counts once in `sessions` whatever its rows; `closed_sessions`
-- counts those with a closed row; the duration states read closed rows.
CREATE TABLE IF NOT EXISTS rollup_sessions_daily (
    day                Date,
    provider           String,
    venue              String,
    sessions           AggregateFunction(uniqExact, String),
    closed_sessions    AggregateFunction(uniqExactIf, String, UInt8),
    closed_rows        AggregateFunction(countIf, UInt8),
    duration_ms_sum    AggregateFunction(sumIf, UInt64, UInt8),
    duration_ms_q      AggregateFunction(quantilesIf(0.5, 0.9, 0.99), UInt64, UInt8)
) ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(day)
ORDER BY (day, provider, venue);

CREATE MATERIALIZED VIEW IF NOT EXISTS rollup_sessions_daily_mv TO rollup_sessions_daily AS
SELECT
    toDate(opened_at) AS day,
    provider,
    venue,
    uniqExactState(session_id) AS sessions,
    uniqExactIfState(session_id, toUInt8(state = 'closed')) AS closed_sessions,
    countIfState(toUInt8(state = 'closed')) AS closed_rows,
    sumIfState(duration_ms, toUInt8(state = 'closed')) AS duration_ms_sum,
    quantilesIfState(0.5, 0.9, 0.99)(duration_ms, toUInt8(state = 'closed')) AS duration_ms_q
FROM sessions
GROUP BY day, provider, venue;

-- Per source and hour: poll runs and failed runs (distinct run ids).
CREATE TABLE IF NOT EXISTS rollup_source_hourly (
    hour      DateTime,
    source_id String,
    provider  String,
    runs      AggregateFunction(uniqExact, String),
    failures  AggregateFunction(uniqExactIf, String, UInt8)
) ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(hour)
ORDER BY (hour, source_id, provider);

CREATE MATERIALIZED VIEW IF NOT EXISTS rollup_source_hourly_mv TO rollup_source_hourly AS
SELECT
    toStartOfHour(run_at) AS hour,
    source_id,
    provider,
    uniqExactState(run_id) AS runs,
    uniqExactIfState(run_id, toUInt8(status = 'failed')) AS failures
FROM runs
GROUP BY hour, source_id, provider;

-- Notifications sent per flow and hour into rollup_flow_hourly, from the
-- notifier's history (0002_notifications.sql). Notifications have no scope:
-- their rows have empty scope_key, provider and venue.
CREATE MATERIALIZED VIEW IF NOT EXISTS rollup_flow_hourly_notifications_mv TO rollup_flow_hourly AS
SELECT
    flow,
    toStartOfHour(recorded_at) AS hour,
    '' AS scope_key,
    '' AS provider,
    '' AS venue,
    maxState('') AS venue_name,
    uniqExactIfState(notification_id, toUInt8(0)) AS opens,
    uniqExactIfState(notification_id, toUInt8(0)) AS closes,
    uniqExactIfState(notification_id, toUInt8(0)) AS stable_opens,
    uniqExactIfState(notification_id, toUInt8(0)) AS stable_closes,
    uniqExactIfState(notification_id, toUInt8(status = 'sent')) AS notifications_sent
FROM notifications
GROUP BY flow, hour, scope_key, provider, venue;

-- Per hour (of the record), flow, channel and event: distinct notifications
-- with a record of each status (a notification that failed, then was sent,
-- counts in both), and quantiles of the latency (observed to sent) of sent
-- ones.
CREATE TABLE IF NOT EXISTS rollup_notifications_hourly (
    hour          DateTime,
    flow          String,
    channel       String,
    event         String,
    notifications AggregateFunction(uniqExact, String),
    sent          AggregateFunction(uniqExactIf, String, UInt8),
    failed        AggregateFunction(uniqExactIf, String, UInt8),
    rejected      AggregateFunction(uniqExactIf, String, UInt8),
    held          AggregateFunction(uniqExactIf, String, UInt8),
    batched       AggregateFunction(uniqExactIf, String, UInt8),
    suppressed    AggregateFunction(uniqExactIf, String, UInt8),
    latency_ms_q  AggregateFunction(quantilesIf(0.5, 0.9, 0.99), UInt64, UInt8)
) ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(hour)
ORDER BY (hour, flow, channel, event);

CREATE MATERIALIZED VIEW IF NOT EXISTS rollup_notifications_hourly_mv TO rollup_notifications_hourly AS
SELECT
    toStartOfHour(recorded_at) AS hour,
    flow,
    channel,
    event,
    uniqExactState(notification_id) AS notifications,
    uniqExactIfState(notification_id, toUInt8(status = 'sent')) AS sent,
    uniqExactIfState(notification_id, toUInt8(status = 'failed')) AS failed,
    uniqExactIfState(notification_id, toUInt8(status = 'rejected')) AS rejected,
    uniqExactIfState(notification_id, toUInt8(status = 'held')) AS held,
    uniqExactIfState(notification_id, toUInt8(status = 'batched')) AS batched,
    uniqExactIfState(notification_id, toUInt8(status = 'suppressed')) AS suppressed,
    quantilesIfState(0.5, 0.9, 0.99)(latency_ms, toUInt8(status = 'sent')) AS latency_ms_q
FROM notifications
GROUP BY hour, flow, channel, event;

-- Per hour of start: checkout attempts (order_id, tr_num) from
-- 0003_checkout.sql, the orders they belong to, how they ended, and
-- quantiles of the time to decide and to finish. Revenue is the sum of
-- total_cost of succeeded attempts as inserted (exact after a rebuild).
CREATE TABLE IF NOT EXISTS rollup_checkout_hourly (
    hour         DateTime,
    attempts     AggregateFunction(uniqExact, String),
    orders       AggregateFunction(uniqExact, String),
    succeeded    AggregateFunction(uniqExactIf, String, UInt8),
    failed       AggregateFunction(uniqExactIf, String, UInt8),
    compensated  AggregateFunction(uniqExactIf, String, UInt8),
    retries      AggregateFunction(uniqExactIf, String, UInt8),
    revenue      AggregateFunction(sumIf, Int64, UInt8),
    decide_ms_q  AggregateFunction(quantiles(0.5, 0.9, 0.99), UInt32),
    duration_ms_q AggregateFunction(quantiles(0.5, 0.9, 0.99), UInt32)
) ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(hour)
ORDER BY hour;

CREATE MATERIALIZED VIEW IF NOT EXISTS rollup_checkout_hourly_mv TO rollup_checkout_hourly AS
SELECT
    toStartOfHour(started_at) AS hour,
    uniqExactState(concat(order_id, '/', toString(tr_num))) AS attempts,
    uniqExactState(order_id) AS orders,
    uniqExactIfState(concat(order_id, '/', toString(tr_num)), toUInt8(status = 'succeeded')) AS succeeded,
    uniqExactIfState(concat(order_id, '/', toString(tr_num)), toUInt8(status = 'failed')) AS failed,
    uniqExactIfState(concat(order_id, '/', toString(tr_num)), toUInt8(compensated > 0)) AS compensated,
    uniqExactIfState(concat(order_id, '/', toString(tr_num)), toUInt8(tr_num > 1)) AS retries,
    sumIfState(total_cost, toUInt8(status = 'succeeded')) AS revenue,
    quantilesState(0.5, 0.9, 0.99)(decide_ms) AS decide_ms_q,
    quantilesState(0.5, 0.9, 0.99)(duration_ms) AS duration_ms_q
FROM checkout_sagas
GROUP BY hour;
