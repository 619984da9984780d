-- 0004_offers: the sell-offer search history (flows/offer).
--
-- One row per search call (offer.HistoryEvent): how it was served (hit,
-- join, miss, seen, gone), the status it answered with (complete,
-- processing when the API answered 202, expired, gone), the time it took,
-- the number of matching offers, the age of a cached result, the
-- canonical filter and the trace id. request_id is the call's unique id,
-- so a redelivered history message collapses into one row on merge; exact
-- counts before merges use uniqExact(request_id).
-- Valid on ClickHouse 18.16 and current releases.
CREATE TABLE IF NOT EXISTS offer_requests (
    request_id    String,
    client_id     String,
    result_id     String,
    at            DateTime,
    at_ms         UInt16,
    outcome       String,
    status        String,
    wait_ms       UInt32,
    matches       UInt32,
    result_age_ms UInt64,
    filter        String,
    trace_id      String
) ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(at)
ORDER BY (result_id, at, request_id);
