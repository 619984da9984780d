-- 0003_checkout: the checkout saga's attempts (flows/checkout).
--
-- One row per finished checkout attempt (order_id, tr_num), written by the
-- checkout-analytics stage from the saga records the order stage appends
-- when an attempt reaches its final status. Redelivered records carry the
-- same (order_id, tr_num) and the same values, so they collapse on merge;
-- exact figures use FINAL or uniqExact. Valid on ClickHouse 18.16 and
-- current releases. Times are DateTime plus a *_ms column.
--   status        succeeded | failed
--   reason        why a failed attempt failed ("insufficient stock for item 7")
--   parts         participants: one stock command per item partition, plus payment
--   compensated   participants whose effect was undone
--   decide_ms     from the start to the decision (every participant answered)
--   duration_ms   from the start to the final status (compensations included)
CREATE TABLE IF NOT EXISTS checkout_sagas (
    order_id     String,
    tr_num       UInt32,
    user_id      String,
    status       String,
    reason       String,
    total_cost   Int64,
    parts        UInt16,
    compensated  UInt16,
    started_at   DateTime,
    started_at_ms UInt16,
    finished_at  DateTime,
    finished_at_ms UInt16,
    decide_ms    UInt32,
    duration_ms  UInt32,
    trace_id     String
) ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(started_at)
ORDER BY (order_id, tr_num);
