// Package httpapi is the availability flow's API: /v1/availability,
// /v1/sources, /v1/watchers and, with ClickHouse, /v1/stats/availability.
package httpapi

import (
	"context"
	"slices"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/clickhouse"
	availflow "github.com/dropstream/dropstream/flows/avail"
)

// Register adds the flow's routes to srv; without ClickHouse the
// statistics answer 503 not_configured.
func Register(srv *api.Server, f *availflow.Flow) {
	AvailabilityRoutes{Projection: f.Projection()}.Register(srv)
	SourceRoutes{Store: f.Sources(), Collector: f.Collector(), Egress: f.Egress(), Quota: f.SourceQuota()}.Register(srv)
	WatcherRoutes{Store: f.Watchers(), Egress: f.Egress()}.Register(srv)
	StatsRoutes{ClickHouse: f.ClickHouse()}.Register(srv)
}

// StatsRoutes are the statistics over the ClickHouse rollups; without
// ClickHouse they answer 503 not_configured.
type StatsRoutes api.StatsSource

// availabilityRow is one group of GET /v1/stats/availability.
type availabilityRow struct {
	Key               api.StatsKey `json:"key"`
	Opens             uint64       `json:"opens"`
	Closes            uint64       `json:"closes"`
	StableOpens       uint64       `json:"stable_opens"`
	StableCloses      uint64       `json:"stable_closes"`
	NotificationsSent uint64       `json:"notifications_sent"`
}

// sessionRow is one group of sessions in GET /v1/stats/availability.
type sessionRow struct {
	Key      api.StatsKey `json:"key"`
	Sessions uint64       `json:"sessions"`
	Closed   uint64       `json:"closed"`
	TotalMs  int64        `json:"total_duration_ms"`
	MeanMs   int64        `json:"mean_duration_ms"`
	P50Ms    int64        `json:"p50_duration_ms"`
	P90Ms    int64        `json:"p90_duration_ms"`
	P99Ms    int64        `json:"p99_duration_ms"`
}

// availabilityStats is GET /v1/stats/availability.
type availabilityStats struct {
	api.StatsHead
	Items []availabilityRow `json:"items"`
	// Sessions are the availability sessions by day of opening, provider
	// or venue, for those groupings only.
	Sessions []sessionRow `json:"sessions,omitempty"`
}

// Register adds the routes to srv.
func (r StatsRoutes) Register(srv *api.Server) {
	srv.Handle(api.Operation{Method: "GET", Path: "/v1/stats/availability", Tag: "stats", Scope: api.ScopeRead, Class: api.ClassRead,
		Summary: "Opens, closes, stable transitions and notifications sent per group from the hourly rollup; sessions by day, provider or venue",
		Query: append([]api.Param{{Name: "group_by", Description: "hour, day, flow, scope, provider or venue (default hour)"},
			{Name: "provider"}, {Name: "venue"}}, api.StatsParams()...),
		Response: availabilityStats{}, Handler: api.StatsHandler(api.StatsSource(r), clickhouse.FlowGroups, r.availability)})
}

func (r StatsRoutes) availability(ctx context.Context, q clickhouse.StatsQuery, head api.StatsHead) (any, error) {
	rows, err := clickhouse.FlowStats(ctx, r.ClickHouse, q)
	if err != nil {
		return nil, err
	}
	out := availabilityStats{StatsHead: head, Items: make([]availabilityRow, 0, len(rows))}
	for _, s := range rows {
		out.Items = append(out.Items, availabilityRow{Key: api.StatsKeyOf(s.Key), Opens: s.Opens, Closes: s.Closes,
			StableOpens: s.StableOpens, StableCloses: s.StableCloses, NotificationsSent: s.NotificationsSent})
	}
	if slices.Contains(clickhouse.SessionGroups, q.GroupBy) && q.Flow == "" {
		sess, err := clickhouse.SessionStats(ctx, r.ClickHouse, q)
		if err != nil {
			return nil, err
		}
		out.Sessions = make([]sessionRow, 0, len(sess))
		for _, s := range sess {
			out.Sessions = append(out.Sessions, sessionRow{Key: api.StatsKeyOf(s.Key), Sessions: s.Sessions, Closed: s.Closed,
				TotalMs: s.TotalDuration.Milliseconds(), MeanMs: s.MeanDuration.Milliseconds(),
				P50Ms: s.P50.Milliseconds(), P90Ms: s.P90.Milliseconds(), P99Ms: s.P99.Milliseconds()})
		}
	}
	return out, nil
}
