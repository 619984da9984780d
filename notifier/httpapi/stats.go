package httpapi

import (
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/clickhouse"
)

// StatsRoutes serve GET /v1/stats/notifications from ClickHouse's hourly
// rollup of the history.
type StatsRoutes struct {
	ClickHouse *clickhouse.Client
	// Now is the clock for the default range. Default time.Now.
	Now func() time.Time
}

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
	From    string            `json:"from"`
	To      string            `json:"to"`
	GroupBy string            `json:"group_by"`
	Items   []notificationRow `json:"items"`
}

// Register adds the route to srv.
func (r StatsRoutes) Register(srv *api.Server) {
	srv.Handle(api.Operation{Method: "GET", Path: "/v1/stats/notifications", Tag: "stats", Scope: api.ScopeRead, Class: api.ClassRead,
		Summary: "Notifications by status and their latency per group from the hourly rollup of the notifier's history",
		Query: append([]api.Param{{Name: "group_by", Description: "hour, day, flow, channel or event (default hour)"},
			{Name: "channel"}}, api.StatsParams()...),
		Response: notificationStats{}, Handler: r.notifications})
}

func (r StatsRoutes) notifications(c *fiber.Ctx) error {
	if r.ClickHouse == nil {
		return api.NotConfigured("ClickHouse", "DROPSTREAM_CLICKHOUSE_DSN")
	}
	q, err := api.ParseStatsQuery(c, clickhouse.NotificationGroups, r.Now)
	if err != nil {
		return err
	}
	rows, err := clickhouse.NotificationStats(c.UserContext(), r.ClickHouse, q)
	if err != nil {
		return api.StatsError(err)
	}
	out := notificationStats{From: q.From.Format(time.RFC3339), To: q.To.Format(time.RFC3339), GroupBy: q.GroupBy,
		Items: make([]notificationRow, 0, len(rows))}
	for _, s := range rows {
		out.Items = append(out.Items, notificationRow{Key: api.StatsKeyOf(s.Key), Notifications: s.Notifications, Sent: s.Sent,
			Failed: s.Failed, Rejected: s.Rejected, Held: s.Held, Batched: s.Batched, Suppressed: s.Suppressed,
			LatencyP50Ms: s.LatencyP50.Milliseconds(), LatencyP90Ms: s.LatencyP90.Milliseconds(), LatencyP99Ms: s.LatencyP99.Milliseconds()})
	}
	return c.JSON(out)
}
