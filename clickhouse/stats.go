package clickhouse

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Group-by keys of StatsQuery. Time groupings produce one row per hour or
// day (UTC); the others one row per value.
const (
	GroupHour     = "hour"
	GroupDay      = "day"
	GroupFlow     = "flow"
	GroupScope    = "scope"
	GroupProvider = "provider"
	GroupVenue    = "venue"
	GroupSource   = "source"
	GroupChannel  = "channel"
	GroupEvent    = "event"
)

// Bounds of StatsQuery.
const (
	MaxStatsRange    = 2 * 366 * 24 * time.Hour // the longest time range of one query.
	MaxStatsRows     = 5000                     // caps the rows of one query (DefaultStatsRows when 0).
	DefaultStatsRows = 1000
	maxFilterLen     = 256 // bounds filter values.
)

// StatsQuery selects rollup rows: [From, To), a grouping and optional
// filters the rollup must have.
type StatsQuery struct {
	From, To time.Time
	// GroupBy is one of the Group* keys each query function accepts.
	GroupBy string
	// Flow, Provider, Venue, SourceID and Channel keep rows with that
	// value.
	Flow, Provider, Venue, SourceID, Channel string
	// Limit caps the rows returned, 1..MaxStatsRows. Default
	// DefaultStatsRows. Rows are ordered by key.
	Limit int
}

// ErrBadStatsQuery is wrapped by the errors of an invalid StatsQuery.
var ErrBadStatsQuery = errors.New("invalid stats query")

// validate checks q against the groupings a rollup allows.
func (q *StatsQuery) validate(groups []string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("clickhouse: %w: %s", ErrBadStatsQuery, fmt.Sprintf(format, args...))
	}
	if q.From.IsZero() || q.To.IsZero() || !q.From.Before(q.To) {
		return bad("want from < to")
	}
	if q.To.Sub(q.From) > MaxStatsRange {
		return bad("range longer than %s", MaxStatsRange)
	}
	if !slices.Contains(groups, q.GroupBy) {
		return bad("group_by %q: want one of %v", q.GroupBy, groups)
	}
	for _, v := range []string{q.Flow, q.Provider, q.Venue, q.SourceID, q.Channel} {
		if len(v) > maxFilterLen {
			return bad("filter longer than %d bytes", maxFilterLen)
		}
	}
	q.Limit = cmp.Or(q.Limit, DefaultStatsRows)
	if q.Limit < 1 || q.Limit > MaxStatsRows {
		return bad("limit %d out of 1..%d", q.Limit, MaxStatsRows)
	}
	return nil
}

// keyExpr is the SQL expression of a grouping over a rollup whose time
// column is timeCol; time keys are Unix seconds (as a string).
func keyExpr(group, timeCol string) string {
	switch group {
	case GroupHour:
		return "toString(toUInt32(toStartOfHour(" + timeCol + ")))"
	case GroupDay:
		return "toString(toUInt32(toDateTime(toDate(" + timeCol + "))))"
	case GroupScope:
		return "scope_key"
	case GroupSource:
		return "source_id"
	}
	return group
}

// where validates q against groups and builds its WHERE clause over
// timeCol with the filters that are set; cols says which filter columns
// the rollup has.
func (q *StatsQuery) where(groups []string, timeCol string, cols map[string]string) (string, []any, error) {
	if err := q.validate(groups); err != nil {
		return "", nil, err
	}
	s := " WHERE " + timeCol + " >= toDateTime(?) AND " + timeCol + " < toDateTime(?)"
	args := []any{q.From.Unix(), q.To.Unix()}
	for name, v := range map[string]string{"flow": q.Flow, "provider": q.Provider, "venue": q.Venue, "source_id": q.SourceID, "channel": q.Channel} {
		if v == "" {
			continue
		}
		col, ok := cols[name]
		if !ok {
			return "", nil, fmt.Errorf("clickhouse: %w: filter %s does not apply here", ErrBadStatsQuery, name)
		}
		s += " AND " + col + " = ?"
		args = append(args, v)
	}
	return s, args, nil
}

// StatKey is the group of a stats row: Time for hour and day groupings,
// Value for the others.
type StatKey struct {
	Time  time.Time
	Value string
}

func parseKey(group, k string) StatKey {
	if group == GroupHour || group == GroupDay {
		n, _ := strconv.ParseInt(k, 10, 64)
		return StatKey{Time: time.Unix(n, 0).UTC()}
	}
	return StatKey{Value: k}
}

// FlowStat is one row of FlowStats.
type FlowStat struct {
	Key               StatKey
	Opens             uint64
	Closes            uint64
	StableOpens       uint64
	StableCloses      uint64
	NotificationsSent uint64
}

// FlowGroups are the groupings FlowStats accepts.
var FlowGroups = []string{GroupHour, GroupDay, GroupFlow, GroupScope, GroupProvider, GroupVenue}

// FlowStats reads rollup_flow_hourly: opens, closes, stable opens and
// closes and notifications sent (distinct ids, exact) per group. Filters:
// Flow, Provider, Venue. The time range applies to whole hours.
func FlowStats(ctx context.Context, c *Client, q StatsQuery) ([]FlowStat, error) {
	where, args, err := q.where(FlowGroups, "hour", map[string]string{"flow": "flow", "provider": "provider", "venue": "venue"})
	if err != nil {
		return nil, err
	}
	sql := `SELECT ` + keyExpr(q.GroupBy, "hour") + ` AS k, uniqExactIfMerge(opens), uniqExactIfMerge(closes),
	uniqExactIfMerge(stable_opens), uniqExactIfMerge(stable_closes), uniqExactIfMerge(notifications_sent)
FROM ` + TableFlowHourly + where + ` GROUP BY k ORDER BY k LIMIT ` + strconv.Itoa(q.Limit)
	return QueryRows(ctx, c, "flow stats", sql, args, func(rows driver.Rows) (FlowStat, error) {
		var s FlowStat
		var k string
		err := rows.Scan(&k, &s.Opens, &s.Closes, &s.StableOpens, &s.StableCloses, &s.NotificationsSent)
		s.Key = parseKey(q.GroupBy, k)
		return s, err
	})
}

// SessionStat is one row of SessionStats.
type SessionStat struct {
	Key StatKey
	// Sessions opened in the group, and how many of them are closed.
	Sessions, Closed uint64
	// TotalDuration and MeanDuration are over closed session rows;
	// P50, P90 and P99 are approximate quantiles of the same.
	TotalDuration, MeanDuration time.Duration
	P50, P90, P99               time.Duration
}

// SessionGroups are the groupings SessionStats accepts.
var SessionGroups = []string{GroupDay, GroupProvider, GroupVenue}

// SessionStats reads rollup_sessions_daily: sessions by day of opening.
// Filters: Provider, Venue. The time range applies to whole days.
func SessionStats(ctx context.Context, c *Client, q StatsQuery) ([]SessionStat, error) {
	where, args, err := q.where(SessionGroups, "toDateTime(day)", map[string]string{"provider": "provider", "venue": "venue"})
	if err != nil {
		return nil, err
	}
	sql := `SELECT ` + keyExpr(q.GroupBy, "day") + ` AS k, uniqExactMerge(sessions), uniqExactIfMerge(closed_sessions),
	countIfMerge(closed_rows), sumIfMerge(duration_ms_sum), quantilesIfMerge(0.5, 0.9, 0.99)(duration_ms_q)
FROM ` + TableSessionsDaily + where + ` GROUP BY k ORDER BY k LIMIT ` + strconv.Itoa(q.Limit)
	return QueryRows(ctx, c, "session stats", sql, args, func(rows driver.Rows) (SessionStat, error) {
		var s SessionStat
		var k string
		var closedRows, sumMs uint64
		var q3 []float64
		if err := rows.Scan(&k, &s.Sessions, &s.Closed, &closedRows, &sumMs, &q3); err != nil {
			return s, err
		}
		s.Key = parseKey(q.GroupBy, k)
		s.TotalDuration = time.Duration(sumMs) * time.Millisecond
		if closedRows > 0 {
			s.MeanDuration = time.Duration(sumMs/closedRows) * time.Millisecond
			if len(q3) == 3 {
				ms := func(f float64) time.Duration { return time.Duration(f) * time.Millisecond }
				s.P50, s.P90, s.P99 = ms(q3[0]), ms(q3[1]), ms(q3[2])
			}
		}
		return s, nil
	})
}

// Rollup tables of the notifier's and the checkout's history
// (schema/0005_rollups.sql over 0002_notifications.sql and
// 0003_checkout.sql).
const (
	// TableNotificationsHourly holds, per hour, flow, channel and event:
	// distinct notifications by status and sent latency quantiles.
	TableNotificationsHourly = "rollup_notifications_hourly"
	// TableCheckoutHourly holds, per hour of start: checkout attempts,
	// orders, outcomes, revenue and time quantiles.
	TableCheckoutHourly = "rollup_checkout_hourly"
)

// NotificationStat is one row of NotificationStats. A notification counts
// once in Notifications, and once in each status it had a record of.
type NotificationStat struct {
	Key                                               StatKey
	Notifications                                     uint64
	Sent, Failed, Rejected, Held, Batched, Suppressed uint64
	LatencyP50, LatencyP90, LatencyP99                time.Duration
}

// NotificationGroups are the groupings NotificationStats accepts.
var NotificationGroups = []string{GroupHour, GroupDay, GroupFlow, GroupChannel, GroupEvent}

// NotificationStats reads rollup_notifications_hourly. Filters: Flow,
// Channel.
func NotificationStats(ctx context.Context, c *Client, q StatsQuery) ([]NotificationStat, error) {
	where, args, err := q.where(NotificationGroups, "hour", map[string]string{"flow": "flow", "channel": "channel"})
	if err != nil {
		return nil, err
	}
	sql := `SELECT ` + keyExpr(q.GroupBy, "hour") + ` AS k, uniqExactMerge(notifications), uniqExactIfMerge(sent),
	uniqExactIfMerge(failed), uniqExactIfMerge(rejected), uniqExactIfMerge(held), uniqExactIfMerge(batched),
	uniqExactIfMerge(suppressed), quantilesIfMerge(0.5, 0.9, 0.99)(latency_ms_q)
FROM ` + TableNotificationsHourly + where + ` GROUP BY k ORDER BY k LIMIT ` + strconv.Itoa(q.Limit)
	return QueryRows(ctx, c, "notification stats", sql, args, func(rows driver.Rows) (NotificationStat, error) {
		var s NotificationStat
		var k string
		var lat []float64
		err := rows.Scan(&k, &s.Notifications, &s.Sent, &s.Failed, &s.Rejected, &s.Held, &s.Batched, &s.Suppressed, &lat)
		s.Key = parseKey(q.GroupBy, k)
		if s.Sent > 0 && len(lat) == 3 {
			s.LatencyP50, s.LatencyP90, s.LatencyP99 = msDuration(lat[0]), msDuration(lat[1]), msDuration(lat[2])
		}
		return s, err
	})
}

func msDuration(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }
