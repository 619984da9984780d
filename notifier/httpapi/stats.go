package httpapi

import (
	"context"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/clickhouse"
)

// StatsRoutes serve GET /v1/stats/notifications from ClickHouse's hourly
// rollup of the history.
type StatsRoutes api.StatsSource

// notificationRow is one group: distinct notifications, the count with a
// record of each status, and the latency of sent ones.
type notificationRow struct {
	Key           api.StatsKey `json:"key"`
	Notifications uint64       `json:"notifications"`
	Sent          uint64       `json:"sent"`
	Failed        uint64       `json:"failed"`
	Rejected      uint64       `json:"rejected"`
	Held          uint64       `json:"held"`
	Batched       uint64       `json:"batched"`
	Suppressed    uint64       `json:"suppressed"`
	LatencyP50Ms  int64        `json:"latency_p50_ms"`
	LatencyP90Ms  int64        `json:"latency_p90_ms"`
	LatencyP99Ms  int64        `json:"latency_p99_ms"`
}

// notificationStats is GET /v1/stats/notifications.
type notificationStats struct {
	api.StatsHead
	Items []notificationRow `json:"items"`
}

// Register adds the route to srv.
func (r StatsRoutes) Register(srv *api.Server) {
	srv.Handle(api.Operation{Method: "GET", Path: "/v1/stats/notifications", Tag: "stats", Scope: api.ScopeRead, Class: api.ClassRead,
		Summary: "Notifications by status and their latency per group from the hourly rollup of the notifier's history",
		Query: append([]api.Param{{Name: "group_by", Description: "hour, day, flow, channel or event (default hour)"},
			{Name: "channel"}}, api.StatsParams()...),
		Response: notificationStats{}, Handler: api.StatsHandler(api.StatsSource(r), clickhouse.NotificationGroups, r.notifications)})
}

func (r StatsRoutes) notifications(ctx context.Context, q clickhouse.StatsQuery, head api.StatsHead) (any, error) {
	rows, err := clickhouse.NotificationStats(ctx, r.ClickHouse, q)
	if err != nil {
		return nil, err
	}
	out := notificationStats{StatsHead: head, Items: make([]notificationRow, 0, len(rows))}
	for _, s := range rows {
		out.Items = append(out.Items, notificationRow{Key: api.StatsKeyOf(s.Key), Notifications: s.Notifications, Sent: s.Sent,
			Failed: s.Failed, Rejected: s.Rejected, Held: s.Held, Batched: s.Batched, Suppressed: s.Suppressed,
			LatencyP50Ms: s.LatencyP50.Milliseconds(), LatencyP90Ms: s.LatencyP90.Milliseconds(), LatencyP99Ms: s.LatencyP99.Milliseconds()})
	}
	return out, nil
}
