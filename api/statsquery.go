package api

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/dropstream/dropstream/clickhouse"
)

// The helpers of every stats route over the ClickHouse rollups, the
// availability's (StatsRoutes) and the notifier's.

// DefaultStatsRange is the range of a stats query without from.
const DefaultStatsRange = 24 * time.Hour

// maxTimeParam bounds the length of from and to.
const maxTimeParam = 40

// StatsParams are the query parameters every stats route reads: from, to,
// limit and flow.
func StatsParams() []Param {
	return []Param{
		{Name: "from", Description: "start of the range, RFC 3339 or Unix seconds (default: to minus 24 hours)"},
		{Name: "to", Description: "end of the range, exclusive, RFC 3339 or Unix seconds (default: now)"},
		{Name: "limit", Type: "integer", Description: "rows, 1..5000 (default 1000)"},
		{Name: "flow"},
	}
}

// ParseStatsQuery reads a stats request's parameters: the range (default the
// DefaultStatsRange before now(); now nil is time.Now), group_by (one of
// groups, default hour), the flow, provider, venue and channel filters and
// the limit. Its errors are 400 answers.
func ParseStatsQuery(c *fiber.Ctx, groups []string, now func() time.Time) (clickhouse.StatsQuery, error) {
	if now == nil {
		now = time.Now
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
	if q.Limit, err = IntQuery(c, "limit", clickhouse.DefaultStatsRows, 1, clickhouse.MaxStatsRows); err != nil {
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

// statsKey is the group of a stats row: time for hour and day groupings
// (RFC 3339, UTC), value for the others. (Its name is its OpenAPI
// schema's.)
type statsKey struct {
	Time  string `json:"time,omitempty"`
	Value string `json:"value,omitempty"`
}

// StatsKey is the group of a stats row in a JSON answer: time for hour and
// day groupings (RFC 3339, UTC), value for the others.
type StatsKey = statsKey

// StatsKeyOf is the JSON group of a ClickHouse stats row.
func StatsKeyOf(k clickhouse.StatKey) StatsKey {
	if !k.Time.IsZero() {
		return statsKey{Time: k.Time.UTC().Format(time.RFC3339)}
	}
	return statsKey{Value: k.Value}
}

// StatsHead is the range and grouping at the head of every stats answer.
type StatsHead struct {
	From    string `json:"from"`
	To      string `json:"to"`
	GroupBy string `json:"group_by"`
}

// StatsSource is what a stats route reads: ClickHouse, and the clock of
// the default range (nil: time.Now).
type StatsSource struct {
	ClickHouse *clickhouse.Client
	Now        func() time.Time
}

// StatsHandler is the handler of a stats route: 503 not_configured
// without src.ClickHouse, 400 on a bad query (also one ClickHouse
// rejects), else the JSON of what
// answer returns for the query read with groups (see ParseStatsQuery).
func StatsHandler(src StatsSource, groups []string,
	answer func(ctx context.Context, q clickhouse.StatsQuery, head StatsHead) (any, error)) fiber.Handler {
	return func(c *fiber.Ctx) error {
		if src.ClickHouse == nil {
			return NotConfigured("ClickHouse", "DROPSTREAM_CLICKHOUSE_DSN")
		}
		q, err := ParseStatsQuery(c, groups, src.Now)
		if err != nil {
			return err
		}
		out, err := answer(c.UserContext(), q, StatsHead{From: q.From.Format(time.RFC3339), To: q.To.Format(time.RFC3339), GroupBy: q.GroupBy})
		return Reply(c, out, err, When(clickhouse.ErrBadStatsQuery, BadRequest("invalid_query", "")))
	}
}
