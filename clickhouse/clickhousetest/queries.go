package clickhousetest

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/dropstream/dropstream/clickhouse"
)

// Rollup tables (schema/0005_rollups.sql) only tests read.
const (
	// TableSourceHourly holds, per hour and source: runs and failed runs.
	TableSourceHourly = "rollup_source_hourly"
	// TableCheckoutHourly holds, per hour of start: checkout attempts,
	// orders, outcomes, revenue and time quantiles.
	TableCheckoutHourly = "rollup_checkout_hourly"
)

// joinTime is the inverse of the writer's split of a time into a DateTime
// column and its milliseconds; 1970-01-01 gives the zero time.
func joinTime(sec time.Time, ms uint16) time.Time {
	if sec.Unix() <= 0 && ms == 0 {
		return time.Time{}
	}
	return sec.UTC().Add(time.Duration(ms) * time.Millisecond)
}

// countBy runs q, whose rows are (key, count), and returns the counts by key.
func countBy(ctx context.Context, c *clickhouse.Client, what, q string, args ...any) (map[string]uint64, error) {
	rows, err := c.Conn().Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("clickhousetest: %s: %w", what, err)
	}
	defer rows.Close()
	out := map[string]uint64{}
	for rows.Next() {
		var k string
		var n uint64
		if err := rows.Scan(&k, &n); err != nil {
			return nil, fmt.Errorf("clickhousetest: %s: %w", what, err)
		}
		out[k] = n
	}
	return out, rows.Err()
}

// CheckoutStats are exact figures over the finished checkout attempts.
type CheckoutStats struct {
	// Attempts, Succeeded and Failed count distinct attempts.
	Attempts, Succeeded, Failed uint64
	// Orders counts distinct orders with an attempt.
	Orders uint64
	// Compensated counts failed attempts that undid at least one effect.
	Compensated uint64
	// DurationP50 and DurationP99 are quantiles of duration_ms.
	DurationP50, DurationP99 time.Duration
	// Reasons counts failed attempts by reason.
	Reasons map[string]uint64
}

// CheckoutSagaStats returns exact attempt counts (FINAL), duration
// quantiles and failure reasons.
func CheckoutSagaStats(ctx context.Context, c *clickhouse.Client) (CheckoutStats, error) {
	var s CheckoutStats
	q := `SELECT count(), countIf(status = 'succeeded'), countIf(status = 'failed'), uniqExact(order_id),
	countIf(status = 'failed' AND compensated > 0), quantileExact(0.5)(duration_ms), quantileExact(0.99)(duration_ms)
FROM ` + clickhouse.TableCheckoutSagas + ` FINAL`
	var d50, d99 uint32
	if err := c.Conn().QueryRow(ctx, q).Scan(&s.Attempts, &s.Succeeded, &s.Failed, &s.Orders, &s.Compensated, &d50, &d99); err != nil {
		return s, fmt.Errorf("clickhousetest: checkout stats: %w", err)
	}
	s.DurationP50, s.DurationP99 = time.Duration(d50)*time.Millisecond, time.Duration(d99)*time.Millisecond
	var err error
	s.Reasons, err = countBy(ctx, c, "checkout failure reasons",
		`SELECT reason, count() FROM `+clickhouse.TableCheckoutSagas+` FINAL WHERE status = 'failed' GROUP BY reason`)
	return s, err
}

// FeedItemEventCounts returns the exact number of distinct events per kind
// of a feed.
func FeedItemEventCounts(ctx context.Context, c *clickhouse.Client, feedID string) (map[string]uint64, error) {
	return countBy(ctx, c, "feed item events",
		"SELECT kind, uniqExact(event_id) FROM "+clickhouse.TableFeedItemEvents+" WHERE feed_id = ? GROUP BY kind", feedID)
}

// OfferRequestCounts are exact counts of distinct search calls by outcome.
type OfferRequestCounts struct {
	Total uint64
	// ByOutcome counts calls per outcome (hit, join, miss, seen, gone).
	ByOutcome map[string]uint64
}

// CountOfferRequests counts distinct search calls (by request_id) of one
// result, or of every result when resultID is empty, exact before merges.
func CountOfferRequests(ctx context.Context, c *clickhouse.Client, resultID string) (OfferRequestCounts, error) {
	where, args := "", []any{}
	if resultID != "" {
		where, args = " WHERE result_id = ?", append(args, resultID)
	}
	by, err := countBy(ctx, c, "count offer requests", `SELECT outcome, uniqExact(request_id) FROM (
		SELECT request_id, argMax(outcome, at) AS outcome FROM `+clickhouse.TableOfferRequests+where+` GROUP BY request_id
	) GROUP BY outcome`, args...)
	if err != nil {
		return OfferRequestCounts{}, err
	}
	out := OfferRequestCounts{ByOutcome: by}
	for _, n := range by {
		out.Total += n
	}
	return out, nil
}

// SessionCounts are exact counts of distinct sessions.
type SessionCounts struct {
	// Total is the number of distinct sessions.
	Total uint64
	// Open and Closed count those whose latest version is open or closed.
	Open, Closed uint64
}

// CountSessions returns the number of distinct sessions (by session_id)
// and how many of them are open and closed by their latest version. It is
// exact before merges.
func CountSessions(ctx context.Context, c *clickhouse.Client) (SessionCounts, error) {
	q := `SELECT count(), countIf(st = '` + clickhouse.SessionOpen + `'), countIf(st = '` + clickhouse.SessionClosed + `')
FROM (SELECT session_id, argMax(state, version) AS st FROM ` + clickhouse.TableSessions + ` GROUP BY session_id)`
	var n SessionCounts
	if err := c.Conn().QueryRow(ctx, q).Scan(&n.Total, &n.Open, &n.Closed); err != nil {
		return SessionCounts{}, fmt.Errorf("clickhousetest: count sessions: %w", err)
	}
	return n, nil
}

// EntitySessions returns the sessions of one entity, latest version of each
// (FINAL), oldest first, at most limit of them (limit < 1: 100).
func EntitySessions(ctx context.Context, c *clickhouse.Client, entityKey string, limit int) ([]clickhouse.SessionRow, error) {
	if limit < 1 {
		limit = 100
	}
	q := `SELECT session_id, entity_key, entity_kind, provider, venue, venue_name, date, slot_time,
	party_size, scope_key, source_id, open_run_id, close_run_id, opened_at, opened_at_ms, closed_at,
	closed_at_ms, duration_ms, state, trace_id
FROM ` + clickhouse.TableSessions + ` FINAL WHERE entity_key = ? ORDER BY opened_at, opened_at_ms, session_id LIMIT ?`
	rows, err := c.Conn().Query(ctx, q, entityKey, limit)
	if err != nil {
		return nil, fmt.Errorf("clickhousetest: sessions of %q: %w", entityKey, err)
	}
	defer rows.Close()
	var out []clickhouse.SessionRow
	for rows.Next() {
		var r clickhouse.SessionRow
		var opened, closed time.Time
		var openedMs, closedMs uint16
		var durMs uint64
		var state string
		if err := rows.Scan(&r.SessionID, &r.EntityKey, &r.EntityKind, &r.Provider, &r.Venue,
			&r.VenueName, &r.Date, &r.SlotTime, &r.PartySize, &r.ScopeKey, &r.SourceID, &r.OpenRunID,
			&r.CloseRunID, &opened, &openedMs, &closed, &closedMs, &durMs, &state, &r.TraceID); err != nil {
			return nil, fmt.Errorf("clickhousetest: sessions of %q: %w", entityKey, err)
		}
		r.OpenedAt, r.ClosedAt = joinTime(opened, openedMs), joinTime(closed, closedMs)
		r.Duration = time.Duration(durMs) * time.Millisecond
		r.Closed = state == clickhouse.SessionClosed
		out = append(out, r)
	}
	return out, rows.Err()
}

// SubscriberNotifications returns the latest state of a subscriber's
// notifications (argMax by version, exact before merges), newest first, at
// most limit (limit < 1: 100).
func SubscriberNotifications(ctx context.Context, c *clickhouse.Client, subscriberID string, limit int) ([]clickhouse.NotificationRow, error) {
	if limit < 1 {
		limit = 100
	}
	q := `SELECT notification_id, argMax(flow, version), argMax(event, version), argMax(destination_id, version),
	argMax(channel, version), argMax(subject, version), argMax(window_key, version), argMax(status, version),
	argMax(attempts, version), argMax(critical, version), argMax(observed_at, version), argMax(observed_at_ms, version),
	argMax(recorded_at, version), argMax(recorded_at_ms, version), argMax(latency_ms, version), argMax(trace_id, version),
	argMax(event_id, version), argMax(run_id, version), argMax(message_id, version), argMax(error, version), max(version) AS v
FROM ` + clickhouse.TableNotifications + ` WHERE subscriber_id = ? GROUP BY notification_id ORDER BY v DESC LIMIT ?`
	rows, err := c.Conn().Query(ctx, q, subscriberID, limit)
	if err != nil {
		return nil, fmt.Errorf("clickhousetest: notifications of %q: %w", subscriberID, err)
	}
	defer rows.Close()
	var out []clickhouse.NotificationRow
	for rows.Next() {
		r := clickhouse.NotificationRow{SubscriberID: subscriberID}
		var obs, rec time.Time
		var obsMs, recMs uint16
		var crit uint8
		var v uint64
		if err := rows.Scan(&r.NotificationID, &r.Flow, &r.Event, &r.DestinationID, &r.Channel, &r.Subject, &r.Window, &r.Status,
			&r.Attempts, &crit, &obs, &obsMs, &rec, &recMs, &r.LatencyMs, &r.TraceID, &r.EventID, &r.RunID, &r.MessageID, &r.Error, &v); err != nil {
			return nil, fmt.Errorf("clickhousetest: notifications of %q: %w", subscriberID, err)
		}
		r.Critical, r.ObservedAt, r.RecordedAt = crit == 1, joinTime(obs, obsMs), joinTime(rec, recMs)
		out = append(out, r)
	}
	return out, rows.Err()
}

// SourceStat is one source's poll runs and failed runs.
type SourceStat struct {
	SourceID       string
	Runs, Failures uint64
}

// SourceStats reads rollup_source_hourly: distinct poll runs and failed
// runs per source, over the hours in [from, to).
func SourceStats(ctx context.Context, c *clickhouse.Client, from, to time.Time) ([]SourceStat, error) {
	return clickhouse.QueryRows(ctx, c, "source stats", `SELECT source_id, uniqExactMerge(runs), uniqExactIfMerge(failures)
FROM `+TableSourceHourly+` WHERE hour >= toDateTime(?) AND hour < toDateTime(?)
GROUP BY source_id ORDER BY source_id`, []any{from.Unix(), to.Unix()}, func(rows driver.Rows) (SourceStat, error) {
		var s SourceStat
		return s, rows.Scan(&s.SourceID, &s.Runs, &s.Failures)
	})
}

// CheckoutHourStat is one hour of rollup_checkout_hourly.
type CheckoutHourStat struct {
	Hour time.Time
	// Attempts (order, tr_num) started in the hour, the orders they belong
	// to, and how the attempts ended.
	Attempts, Orders, Succeeded, Failed uint64
	// Compensated attempts had an effect undone; Retries have tr_num > 1.
	Compensated, Retries uint64
	// Revenue is the total cost of succeeded attempts.
	Revenue int64
	// DurationP50 is the median time to the final status.
	DurationP50 time.Duration
}

// CheckoutHourly reads rollup_checkout_hourly by hour over [from, to).
func CheckoutHourly(ctx context.Context, c *clickhouse.Client, from, to time.Time) ([]CheckoutHourStat, error) {
	return clickhouse.QueryRows(ctx, c, "checkout stats", `SELECT hour, uniqExactMerge(attempts), uniqExactMerge(orders),
	uniqExactIfMerge(succeeded), uniqExactIfMerge(failed), uniqExactIfMerge(compensated), uniqExactIfMerge(retries),
	sumIfMerge(revenue), quantilesMerge(0.5)(duration_ms_q)
FROM `+TableCheckoutHourly+` WHERE hour >= toDateTime(?) AND hour < toDateTime(?)
GROUP BY hour ORDER BY hour`, []any{from.Unix(), to.Unix()}, func(rows driver.Rows) (CheckoutHourStat, error) {
		var s CheckoutHourStat
		var dur []float64
		err := rows.Scan(&s.Hour, &s.Attempts, &s.Orders, &s.Succeeded, &s.Failed, &s.Compensated, &s.Retries, &s.Revenue, &dur)
		if len(dur) == 1 {
			s.DurationP50 = time.Duration(dur[0] * float64(time.Millisecond))
		}
		return s, err
	})
}
