// Package clickhouse connects dropstream to ClickHouse over the native
// protocol (clickhouse-go v2).
//
// It works with clickhouse-server 18.16 and current releases: every INSERT
// names its columns, and only clickhouse:// (or tcp://) DSNs are accepted.
// Migrate applies the embedded schema/NNNN_name.sql files. Counts are exact
// before merges (uniqExact, argMax).
package clickhouse

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Defaults applied by Open to zero fields of Config.
const (
	DefaultDialTimeout  = 5 * time.Second
	DefaultMaxOpenConns = 10
)

// ErrUnsupportedProtocol is returned (wrapped) for DSNs that do not use the
// native protocol, such as http:// and https://.
var ErrUnsupportedProtocol = errors.New("clickhouse: only the native protocol is supported (clickhouse://host:9000/db); HTTP fails with ClickHouse 18.16")

// Config configures a Client. Zero fields take the documented defaults.
type Config struct {
	// DSN is the native-protocol address, e.g.
	// "clickhouse://user:pass@127.0.0.1:9000/db". Required; http(s):// is
	// ErrUnsupportedProtocol.
	DSN string
	// DialTimeout bounds establishing one connection. Default 5s. It
	// overrides a dial_timeout parameter of the DSN.
	DialTimeout time.Duration
	// MaxOpenConns caps the connections kept to the server. Default 10. It
	// overrides a max_open_conns parameter of the DSN.
	MaxOpenConns int
}

// SettingInsertDistributedSync is set to 1 unless the DSN sets it: an
// insert through a Distributed table returns once every shard has its rows.
const SettingInsertDistributedSync = "insert_distributed_sync"

// Validate reports whether Open can use cfg: a native-protocol DSN and no
// negative duration or count.
func (c Config) Validate() error {
	_, err := c.options()
	return err
}

// options validates c and returns the clickhouse-go options for it, with the
// defaults applied.
func (c Config) options() (*ch.Options, error) {
	if c.DSN == "" {
		return nil, errors.New("clickhouse: Config.DSN is empty")
	}
	if c.DialTimeout < 0 {
		return nil, fmt.Errorf("clickhouse: Config.DialTimeout %v is negative", c.DialTimeout)
	}
	if c.MaxOpenConns < 0 {
		return nil, fmt.Errorf("clickhouse: Config.MaxOpenConns %d is negative", c.MaxOpenConns)
	}
	u, err := url.Parse(c.DSN)
	if err != nil {
		// url.Error quotes the DSN, password included: report only the cause.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, fmt.Errorf("clickhouse: parse DSN: %w", err)
	}
	switch u.Scheme {
	case "clickhouse", "tcp":
	case "http", "https":
		return nil, fmt.Errorf("clickhouse: DSN scheme %q: %w", u.Scheme, ErrUnsupportedProtocol)
	default:
		return nil, fmt.Errorf("clickhouse: DSN scheme %q: want clickhouse://", u.Scheme)
	}
	opts, err := ch.ParseDSN(c.DSN)
	if err != nil {
		return nil, fmt.Errorf("clickhouse: parse DSN: %w", err)
	}
	if opts.Protocol != ch.Native {
		return nil, fmt.Errorf("clickhouse: DSN protocol %s: %w", opts.Protocol, ErrUnsupportedProtocol)
	}
	if opts.Settings == nil {
		opts.Settings = ch.Settings{}
	}
	if _, ok := opts.Settings[SettingInsertDistributedSync]; !ok {
		opts.Settings[SettingInsertDistributedSync] = 1 // settings must be int or bool on 18.16
	}
	opts.DialTimeout = cmp.Or(c.DialTimeout, DefaultDialTimeout)
	opts.MaxOpenConns = cmp.Or(c.MaxOpenConns, DefaultMaxOpenConns)
	if opts.MaxIdleConns <= 0 || opts.MaxIdleConns > opts.MaxOpenConns {
		opts.MaxIdleConns = min(5, opts.MaxOpenConns)
	}
	return opts, nil
}

// Client is a pool of native-protocol connections to one ClickHouse server.
// It is safe for concurrent use.
type Client struct {
	conn driver.Conn
	dsn  string // reaches the other servers of a cluster (credentials, database)
}

// Open validates cfg, connects, and pings the server once; it returns an error
// (wrapping the cause) if any step fails, and then holds no connection.
func Open(ctx context.Context, cfg Config) (*Client, error) {
	opts, err := cfg.options()
	if err != nil {
		return nil, err
	}
	conn, err := ch.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("clickhouse: open %v: %w", opts.Addr, err)
	}
	c := &Client{conn: conn, dsn: cfg.DSN}
	if err := c.Ping(ctx); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return c, nil
}

// Ping checks that the server answers.
func (c *Client) Ping(ctx context.Context) error {
	if err := c.conn.Ping(ctx); err != nil {
		return fmt.Errorf("clickhouse: ping: %w", err)
	}
	return nil
}

// Conn returns the underlying clickhouse-go connection pool for queries and
// batches. It is owned by the Client: do not close it, call Client.Close.
func (c *Client) Conn() driver.Conn { return c.conn }

// Close closes every connection. The Client must not be used afterwards.
func (c *Client) Close() error {
	if err := c.conn.Close(); err != nil {
		return fmt.Errorf("clickhouse: close: %w", err)
	}
	return nil
}

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

// TableNotificationsHourly is the rollup of the notifier's history
// (schema/0005_rollups.sql over 0002_notifications.sql): per hour, flow,
// channel and event, distinct notifications by status and sent latency
// quantiles.
const TableNotificationsHourly = "rollup_notifications_hourly"

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
