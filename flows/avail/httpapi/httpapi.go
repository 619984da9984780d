// Package httpapi is the availability flow's API: /v1/availability,
// /v1/sources, /v1/watchers and, with ClickHouse, /v1/stats/availability.
package httpapi

import (
	"github.com/dropstream/dropstream/api"
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
