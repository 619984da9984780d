package clickhouse

import (
	"context"
	"strconv"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

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
