package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Rollup tables of schema/0005_rollups.sql, all dashboards and stats read.
const (
	// TableFlowHourly holds, per flow, hour, scope (provider, venue):
	// opens, closes, stable opens and closes, notifications sent.
	TableFlowHourly = "rollup_flow_hourly"
	// TableSessionsDaily holds, per day of opening, provider and venue:
	// sessions, closed sessions, and duration sum and quantiles.
	TableSessionsDaily = "rollup_sessions_daily"
)

// View is an embedded materialized view: Select reads the raw table
// Source and inserts Columns, in order, into the rollup table Target.
type View struct {
	Name, Target, Source string
	// SourceTime is the source's time column, the argument of its
	// PARTITION BY toYYYYMM(...) or toYYYYMMDD(...).
	SourceTime string
	Columns    []string
	Select     string
}

var (
	viewRe      = regexp.MustCompile(`(?is)^CREATE\s+MATERIALIZED\s+VIEW\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)\s+TO\s+(\w+)\s+AS\s+(SELECT\s.*)$`)
	tableRe     = regexp.MustCompile(`(?is)^CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)\s*\(.*\bPARTITION\s+BY\s+(toYYYYMM|toYYYYMMDD)\((\w+)\)`)
	fromRe      = regexp.MustCompile(`(?is)\bFROM\s+(\w+)\s+GROUP\s+BY\s`)
	groupByRe   = regexp.MustCompile(`(?is)\sGROUP\s+BY\s`)
	aliasRe     = regexp.MustCompile(`(?is)\bAS\s+(\w+)\s*$`)
	identRe     = regexp.MustCompile(`^\w+$`)
	errNotMonth = errors.New("not a month partition")
)

// Views returns the materialized views of the embedded schema, in migration
// order. Each view must read one table (`FROM t GROUP BY ...`) partitioned by
// toYYYYMM or toYYYYMMDD of a column, so a month of it can be rebuilt.
func Views() ([]View, error) {
	migrations, err := Migrations()
	if err != nil {
		return nil, err
	}
	timeOf := map[string]string{}
	var views []View
	for _, m := range migrations {
		for _, stmt := range m.Statements {
			if t := tableRe.FindStringSubmatch(stmt); t != nil {
				timeOf[t[1]] = t[3]
				continue
			}
			v := viewRe.FindStringSubmatch(stmt)
			if v == nil {
				continue
			}
			view := View{Name: v[1], Target: v[2], Select: strings.TrimSpace(v[3])}
			from := fromRe.FindStringSubmatch(view.Select)
			if from == nil {
				return nil, fmt.Errorf("clickhouse: view %s in %s: want SELECT ... FROM table GROUP BY columns", view.Name, m.Name)
			}
			view.Source = from[1]
			view.SourceTime = timeOf[view.Source]
			if view.SourceTime == "" {
				return nil, fmt.Errorf("clickhouse: view %s reads %s, which is not partitioned by month or day in the schema", view.Name, view.Source)
			}
			if view.Columns, err = selectColumns(view.Select); err != nil {
				return nil, fmt.Errorf("clickhouse: view %s: %w", view.Name, err)
			}
			views = append(views, view)
		}
	}
	return views, nil
}

// RollupTables returns the target tables of Views, sorted.
func RollupTables() ([]string, error) {
	views, err := Views()
	var out []string
	for _, v := range views {
		out = append(out, v.Target)
	}
	slices.Sort(out)
	return slices.Compact(out), err
}

// selectColumns returns a SELECT list's output names (alias or bare column).
func selectColumns(sel string) ([]string, error) {
	body := strings.TrimSpace(sel[len("SELECT"):])
	var items []string
	depth, start := 0, 0
	inQuote := false
	for i := 0; i < len(body); i++ {
		switch ch := body[i]; {
		case ch == '\'':
			inQuote = !inQuote
		case inQuote:
		case ch == '(':
			depth++
		case ch == ')':
			depth--
		case ch == ',' && depth == 0:
			items = append(items, body[start:i])
			start = i + 1
		case depth == 0 && i > 0 && isSpace(body[i-1]) && isKeyword(body[i:], "FROM"):
			items = append(items, body[start:i])
			start = -1
			i = len(body)
		}
	}
	if start != -1 {
		return nil, errors.New("select list without FROM")
	}
	cols := make([]string, 0, len(items))
	for _, it := range items {
		it = strings.TrimSpace(it)
		if m := aliasRe.FindStringSubmatch(it); m != nil {
			cols = append(cols, m[1])
		} else if identRe.MatchString(it) {
			cols = append(cols, it)
		} else {
			return nil, fmt.Errorf("select item %q has no alias", it)
		}
	}
	return cols, nil
}

// isKeyword reports whether s starts with the keyword kw followed by a blank.
func isKeyword(s, kw string) bool {
	return len(s) > len(kw) && strings.EqualFold(s[:len(kw)], kw) && isSpace(s[len(kw)])
}

func isSpace(b byte) bool { return b == ' ' || b == '\n' || b == '\t' || b == '\r' }

// historySources are raw tables whose every row counts although rows
// collapse on merge: Rebuild reads them without FINAL.
var historySources = map[string]bool{TableNotifications: true}

// monthSelect is v's SELECT over one source month (FINAL but for historySources).
func (v View) monthSelect(month int, source string) string {
	loc := fromRe.FindStringIndex(v.Select)
	g := groupByRe.FindStringIndex(v.Select[loc[0]:])
	final := " FINAL"
	if historySources[v.Source] {
		final = ""
	}
	return v.Select[:loc[0]] + fmt.Sprintf("FROM %s%s WHERE toYYYYMM(%s) = %d", source, final, v.SourceTime, month) +
		v.Select[loc[0]+g[0]:]
}

// RebuildConfig selects what Rebuild recomputes; zero rebuilds everything.
type RebuildConfig struct {
	// From is the first month rebuilt; zero: the sources' oldest.
	From time.Time
	// To is the last month rebuilt, inclusive. Zero: the newest.
	To time.Time
	// Tables restricts the rebuild to these rollup tables. Empty: all.
	Tables []string
	// Progress, if set, is called before each month and after the last (per server).
	Progress func(RebuildStep)
	// Shards are every server's DSN in cluster mode. Default: system.clusters.
	Shards []string
}

// RebuildStep reports the progress of Rebuild.
type RebuildStep struct {
	// Shard is the server's host:port in cluster mode, else "".
	Shard string
	// Table is the rollup table, Month its partition (YYYYMM).
	Table string
	Month int
	// Done of Total months of all tables are rebuilt.
	Done, Total int
	// Elapsed is the time since Rebuild started.
	Elapsed time.Duration
}

// Rebuild recomputes rollup tables from their raw tables a month at a
// time: it drops the month's partition and re-runs the views into it over
// FINAL rows. This backfills rows older than the views and makes sums exact
// after duplicate inserts. In cluster mode each server rebuilds its local
// tables. Rows inserted during a rebuild may count twice in sums (counts
// stay exact).
func Rebuild(ctx context.Context, c *Client, cfg RebuildConfig) error {
	return onEveryShard(ctx, c, cfg.Shards, func(shard string, sc *Client) error {
		start := time.Now()
		views, err := Views()
		if err != nil {
			return err
		}
		byTable := map[string][]View{}
		for _, v := range views {
			if len(cfg.Tables) == 0 || slices.Contains(cfg.Tables, v.Target) {
				byTable[v.Target] = append(byTable[v.Target], v)
			}
		}
		for _, t := range cfg.Tables {
			if _, ok := byTable[t]; !ok {
				return fmt.Errorf("clickhouse: rebuild: %q is not a rollup table", t)
			}
		}
		type job struct {
			table string
			month int
		}
		var jobs []job
		for _, t := range slices.Sorted(maps.Keys(byTable)) {
			var months []int
			for _, v := range byTable[t] {
				ms, err := partitionMonths(ctx, sc, v.Source)
				if err != nil {
					return err
				}
				months = append(months, ms...)
			}
			slices.Sort(months)
			for _, m := range slices.Compact(months) {
				if (cfg.From.IsZero() || m >= yyyymm(cfg.From)) && (cfg.To.IsZero() || m <= yyyymm(cfg.To)) {
					jobs = append(jobs, job{t, m})
				}
			}
		}
		say := func(s RebuildStep) {
			if cfg.Progress != nil {
				s.Shard, s.Total, s.Elapsed = shard, len(jobs), time.Since(start)
				cfg.Progress(s)
			}
		}
		for i, j := range jobs {
			say(RebuildStep{Table: j.table, Month: j.month, Done: i})
			target, err := localName(ctx, sc, j.table)
			if err != nil {
				return err
			}
			drop := fmt.Sprintf("ALTER TABLE %s DROP PARTITION ID '%d'", target, j.month)
			if err := sc.conn.Exec(ctx, drop); err != nil {
				return fmt.Errorf("clickhouse: rebuild %s %d: %w", j.table, j.month, err)
			}
			for _, v := range byTable[j.table] {
				source, err := localName(ctx, sc, v.Source)
				if err != nil {
					return err
				}
				q := "INSERT INTO " + target + " (" + strings.Join(v.Columns, ", ") + ") " + v.monthSelect(j.month, source)
				if err := sc.conn.Exec(ctx, q); err != nil {
					return fmt.Errorf("clickhouse: rebuild %s %d from %s: %w", j.table, j.month, v.Source, err)
				}
			}
		}
		say(RebuildStep{Done: len(jobs)})
		return nil
	})
}

func yyyymm(t time.Time) int { return t.Year()*100 + int(t.Month()) }

// partitionMonths returns the months (YYYYMM) of table's active parts.
func partitionMonths(ctx context.Context, c *Client, table string) ([]int, error) {
	_, ids, err := partitionIDs(ctx, c, table)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, id := range ids {
		start, _, err := partitionSpan(id)
		if err != nil {
			return nil, fmt.Errorf("clickhouse: %s partition %q: %w", table, id, err)
		}
		out = append(out, yyyymm(start))
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// localName returns table+LocalSuffix if it exists (cluster mode), else table.
func localName(ctx context.Context, c *Client, table string) (string, error) {
	var n uint64
	err := c.conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = currentDatabase() AND name = ?",
		table+LocalSuffix).Scan(&n)
	if err != nil {
		return "", fmt.Errorf("clickhouse: look up %s%s: %w", table, LocalSuffix, err)
	}
	if n > 0 {
		return table + LocalSuffix, nil
	}
	return table, nil
}

// partitionIDs returns the table that holds table's rows on this server
// (localName) and the distinct partition ids of its active parts.
func partitionIDs(ctx context.Context, c *Client, table string) (local string, ids []string, err error) {
	if local, err = localName(ctx, c, table); err != nil {
		return "", nil, err
	}
	ids, err = QueryRows(ctx, c, "partitions of "+local, `SELECT DISTINCT partition_id FROM system.parts
WHERE database = currentDatabase() AND table = ? AND active ORDER BY partition_id`, []any{local}, scanOne[string])
	return local, ids, err
}

// partitionSpan returns the time span [start, end) of a partition id made
// by toYYYYMM (YYYYMM) or toYYYYMMDD (YYYYMMDD), read as UTC.
func partitionSpan(id string) (start, end time.Time, err error) {
	switch len(id) {
	case 6:
		if start, err = time.Parse("200601", id); err == nil {
			return start, start.AddDate(0, 1, 0), nil
		}
	case 8:
		if start, err = time.Parse("20060102", id); err == nil {
			return start, start.AddDate(0, 0, 1), nil
		}
	}
	return time.Time{}, time.Time{}, errNotMonth
}
