package api

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/dropstream/dropstream/clickhouse"
)

// StatsRoutes are the read routes over the ClickHouse rollups
// (schema/0005_rollups.sql). They need a ClickHouse client.
type StatsRoutes struct {
	ClickHouse *clickhouse.Client
	// Now is the clock for the default range. Default time.Now.
	Now func() time.Time
}

// DefaultStatsRange is the range of a stats query without from.
const DefaultStatsRange = 24 * time.Hour

// statsKey is the group of a stats row: time for hour and day groupings
// (RFC 3339, UTC), value for the others.
type statsKey struct {
	Time  string `json:"time,omitempty"`
	Value string `json:"value,omitempty"`
}

// availabilityRow is one group of GET /v1/stats/availability.
type availabilityRow struct {
	Key               statsKey `json:"key"`
	Opens             uint64   `json:"opens"`
	Closes            uint64   `json:"closes"`
	StableOpens       uint64   `json:"stable_opens"`
	StableCloses      uint64   `json:"stable_closes"`
	NotificationsSent uint64   `json:"notifications_sent"`
}

// sessionRow is one group of sessions in GET /v1/stats/availability.
type sessionRow struct {
	Key      statsKey `json:"key"`
	Sessions uint64   `json:"sessions"`
	Closed   uint64   `json:"closed"`
	TotalMs  int64    `json:"total_duration_ms"`
	MeanMs   int64    `json:"mean_duration_ms"`
	P50Ms    int64    `json:"p50_duration_ms"`
	P90Ms    int64    `json:"p90_duration_ms"`
	P99Ms    int64    `json:"p99_duration_ms"`
}

// availabilityStats is GET /v1/stats/availability.
type availabilityStats struct {
	From    string            `json:"from"`
	To      string            `json:"to"`
	GroupBy string            `json:"group_by"`
	Items   []availabilityRow `json:"items"`
	// Sessions are the availability sessions by day of opening, provider
	// or venue, for those groupings only.
	Sessions []sessionRow `json:"sessions,omitempty"`
}

// notificationRow is one group of GET /v1/stats/notifications: distinct
// notifications, and how many had a record of each status (one that failed,
// then was sent, counts in both), with the latency of sent ones.
type notificationRow struct {
	Key           statsKey `json:"key"`
	Notifications uint64   `json:"notifications"`
	Sent          uint64   `json:"sent"`
	Failed        uint64   `json:"failed"`
	Rejected      uint64   `json:"rejected"`
	Held          uint64   `json:"held"`
	Batched       uint64   `json:"batched"`
	Suppressed    uint64   `json:"suppressed"`
	LatencyP50Ms  int64    `json:"latency_p50_ms"`
	LatencyP90Ms  int64    `json:"latency_p90_ms"`
	LatencyP99Ms  int64    `json:"latency_p99_ms"`
}

// notificationStats is GET /v1/stats/notifications.
type notificationStats struct {
	From    string            `json:"from"`
	To      string            `json:"to"`
	GroupBy string            `json:"group_by"`
	Items   []notificationRow `json:"items"`
}

// Register adds the routes to srv.
func (r StatsRoutes) Register(srv *Server) {
	common := []Param{
		{Name: "from", Description: "start of the range, RFC 3339 or Unix seconds (default: to minus 24 hours)"},
		{Name: "to", Description: "end of the range, exclusive, RFC 3339 or Unix seconds (default: now)"},
		{Name: "limit", Type: "integer", Description: "rows, 1..5000 (default 1000)"},
		{Name: "flow"},
	}
	srv.Handle(Operation{Method: "GET", Path: "/v1/stats/availability", Tag: "stats", Scope: ScopeRead,
		Summary: "Opens, closes, stable transitions and notifications sent per group from the hourly rollup; sessions by day, provider or venue",
		Query: append([]Param{{Name: "group_by", Description: "hour, day, flow, scope, provider or venue (default hour)"},
			{Name: "provider"}, {Name: "venue"}}, common...),
		Response: availabilityStats{}, Handler: r.availability})
	srv.Handle(Operation{Method: "GET", Path: "/v1/stats/notifications", Tag: "stats", Scope: ScopeRead,
		Summary: "Notifications by status and their latency per group from the hourly rollup of the notifier's history",
		Query: append([]Param{{Name: "group_by", Description: "hour, day, flow, channel or event (default hour)"},
			{Name: "channel"}}, common...),
		Response: notificationStats{}, Handler: r.notifications})
}

// maxTimeParam bounds the length of from and to.
const maxTimeParam = 40

// statsQuery reads the common parameters.
func (r StatsRoutes) statsQuery(c *fiber.Ctx, groups []string) (clickhouse.StatsQuery, error) {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	var q clickhouse.StatsQuery
	var err error
	if q.To, err = timeParam(c, "to", now().UTC()); err != nil {
		return q, err
	}
	if q.From, err = timeParam(c, "from", q.To.Add(-DefaultStatsRange)); err != nil {
		return q, err
	}
	if !q.From.Before(q.To) {
		return q, BadRequest("invalid_range", "from must be before to")
	}
	if q.To.Sub(q.From) > clickhouse.MaxStatsRange {
		return q, BadRequest("invalid_range", "the range is longer than "+strconv.Itoa(int(clickhouse.MaxStatsRange/(24*time.Hour)))+" days")
	}
	q.GroupBy = c.Query("group_by", clickhouse.GroupHour)
	if !slices.Contains(groups, q.GroupBy) {
		return q, BadRequest("invalid_group_by", "group_by must be one of "+strings.Join(groups, ", "))
	}
	q.Flow, q.Provider, q.Venue, q.Channel = c.Query("flow"), c.Query("provider"), c.Query("venue"), c.Query("channel")
	for _, v := range []string{q.Flow, q.Provider, q.Venue, q.Channel} {
		if len(v) > 256 {
			return q, BadRequest("invalid_filter", "filters are at most 256 bytes")
		}
	}
	if q.Limit, err = intQuery(c, "limit", clickhouse.DefaultStatsRows, 1, clickhouse.MaxStatsRows); err != nil {
		return q, err
	}
	return q, nil
}

// timeParam parses an optional RFC 3339 or Unix-seconds parameter.
func timeParam(c *fiber.Ctx, name string, def time.Time) (time.Time, error) {
	s := c.Query(name)
	if s == "" {
		return def, nil
	}
	if len(s) <= maxTimeParam {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil && n >= 0 && n < 1<<33 {
			return time.Unix(n, 0).UTC(), nil
		}
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, BadRequest("invalid_"+name, name+" must be an RFC 3339 time or Unix seconds")
}

func toKey(k clickhouse.StatKey) statsKey {
	if !k.Time.IsZero() {
		return statsKey{Time: k.Time.UTC().Format(time.RFC3339)}
	}
	return statsKey{Value: k.Value}
}

// statsError turns a rejected query into a 400.
func statsError(err error) error {
	if errors.Is(err, clickhouse.ErrBadStatsQuery) {
		return BadRequest("invalid_query", err.Error())
	}
	return err
}

func (r StatsRoutes) availability(c *fiber.Ctx) error {
	q, err := r.statsQuery(c, clickhouse.FlowGroups)
	if err != nil {
		return err
	}
	rows, err := clickhouse.FlowStats(c.UserContext(), r.ClickHouse, q)
	if err != nil {
		return statsError(err)
	}
	out := availabilityStats{From: q.From.Format(time.RFC3339), To: q.To.Format(time.RFC3339), GroupBy: q.GroupBy,
		Items: make([]availabilityRow, 0, len(rows))}
	for _, s := range rows {
		out.Items = append(out.Items, availabilityRow{Key: toKey(s.Key), Opens: s.Opens, Closes: s.Closes,
			StableOpens: s.StableOpens, StableCloses: s.StableCloses, NotificationsSent: s.NotificationsSent})
	}
	if slices.Contains(clickhouse.SessionGroups, q.GroupBy) && q.Flow == "" {
		sess, err := clickhouse.SessionStats(c.UserContext(), r.ClickHouse, q)
		if err != nil {
			return statsError(err)
		}
		out.Sessions = make([]sessionRow, 0, len(sess))
		for _, s := range sess {
			out.Sessions = append(out.Sessions, sessionRow{Key: toKey(s.Key), Sessions: s.Sessions, Closed: s.Closed,
				TotalMs: s.TotalDuration.Milliseconds(), MeanMs: s.MeanDuration.Milliseconds(),
				P50Ms: s.P50.Milliseconds(), P90Ms: s.P90.Milliseconds(), P99Ms: s.P99.Milliseconds()})
		}
	}
	return c.JSON(out)
}

func (r StatsRoutes) notifications(c *fiber.Ctx) error {
	q, err := r.statsQuery(c, clickhouse.NotificationGroups)
	if err != nil {
		return err
	}
	rows, err := clickhouse.NotificationStats(c.UserContext(), r.ClickHouse, q)
	if err != nil {
		return statsError(err)
	}
	out := notificationStats{From: q.From.Format(time.RFC3339), To: q.To.Format(time.RFC3339), GroupBy: q.GroupBy,
		Items: make([]notificationRow, 0, len(rows))}
	for _, s := range rows {
		out.Items = append(out.Items, notificationRow{Key: toKey(s.Key), Notifications: s.Notifications, Sent: s.Sent,
			Failed: s.Failed, Rejected: s.Rejected, Held: s.Held, Batched: s.Batched, Suppressed: s.Suppressed,
			LatencyP50Ms: s.LatencyP50.Milliseconds(), LatencyP90Ms: s.LatencyP90.Milliseconds(), LatencyP99Ms: s.LatencyP99.Milliseconds()})
	}
	return c.JSON(out)
}
