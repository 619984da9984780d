package clickhouse_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/clickhouse/clickhousetest"
	"github.com/dropstream/dropstream/internal/testenv"
)

// clusterWorld is a two-shard cluster migrated in cluster mode, and a
// single server migrated as usual, both holding the same rows.
type clusterWorld struct {
	cluster  *testenv.ClickHouseCluster
	shards   []*clickhouse.Client // one per shard, its own database
	dist     *clickhouse.Client   // shard 0, inserting through Distributed tables (synchronously: Open's default)
	single   *clickhouse.Client
	from, to time.Time
	rows     struct{ runs, transitions, sessions int } // rows inserted, duplicates included
	entities int
}

func openCluster(t *testing.T, dsn string) *clickhouse.Client {
	t.Helper()
	c, err := clickhouse.Open(context.Background(), clickhouse.Config{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func newClusterWorld(t *testing.T) *clusterWorld {
	t.Helper()
	ctx := context.Background()
	w := &clusterWorld{cluster: testenv.StartClickHouseCluster(t, testenv.ClickHouseClusterConfig{})}
	dsns := w.cluster.Database(t)

	migrations, err := clickhouse.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range migrations {
		names = append(names, m.Name)
	}
	var lines []string
	res, err := clickhouse.MigrateCluster(ctx, dsns[0], clickhouse.ClusterConfig{Name: w.cluster.Name}, func(l string) { lines = append(lines, l) })
	if err != nil {
		t.Fatalf("migrate cluster: %v\n%s", err, strings.Join(lines, "\n"))
	}
	if len(res) != w.cluster.Shards() {
		t.Fatalf("migrated %d servers, the cluster has %d", len(res), w.cluster.Shards())
	}
	for i, r := range res {
		if r.Addr != w.cluster.Addr(i) || !slices.Equal(r.Applied, names) {
			t.Errorf("server %d: %+v, want %s with %v applied", i, r, w.cluster.Addr(i), names)
		}
	}
	// Again, with the shards listed: nothing left to do.
	res, err = clickhouse.MigrateCluster(ctx, dsns[1], clickhouse.ClusterConfig{Name: w.cluster.Name, Shards: dsns}, nil)
	if err != nil || len(res) != 2 || len(res[0].Applied)+len(res[1].Applied) != 0 {
		t.Errorf("second migration: %+v, %v; want nothing applied on 2 servers", res, err)
	}
	for _, dsn := range dsns {
		w.shards = append(w.shards, openCluster(t, dsn))
	}
	// No insert_distributed_sync in the DSN: Open sets it.
	w.dist = openCluster(t, dsns[0])
	w.single = migrated(t)
	return w
}

// load inserts the same rows, each batch twice (a redelivery), into the
// cluster and the single server: per entity an open and a close (raw and
// stable), a closed session and an open one; per scope runs, some failed.
func (w *clusterWorld) load(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	base := time.Date(2026, 1, 10, 0, 0, 0, 0, time.UTC)
	w.from, w.to = base.Add(-time.Hour), base.Add(72*time.Hour)
	var runs []clickhouse.RunRow
	var trs []clickhouse.TransitionRow
	var sess []clickhouse.SessionRow
	for s := range 12 {
		provider, venue := fmt.Sprintf("p%d", s%3), fmt.Sprintf("v%d", s)
		scope := fmt.Sprintf("src|%s|%s|2026-01-12|2", provider, venue)
		for r := range 4 {
			at := base.Add(time.Duration(s*7+r*13) * time.Hour / 4)
			runs = append(runs, clickhouse.RunRow{RunID: fmt.Sprintf("run-%d-%d", s, r), SourceID: fmt.Sprintf("src%d", s%2), Provider: provider,
				ScopeKey: scope, StartedAt: at, RunAt: at, Status: map[bool]string{true: "failed", false: "ok"}[r == 3], Applied: r != 3})
		}
		for e := range 10 {
			w.entities++
			key := fmt.Sprintf("%s|%s|2026-01-12|%02d:00|2", provider, venue, e)
			opened := base.Add(time.Duration(s*5+e) * time.Hour)
			closed := opened.Add(time.Duration(e+1) * 17 * time.Minute)
			for i, kind := range []string{"open", "close"} {
				at := []time.Time{opened, closed}[i]
				trs = append(trs, clickhouse.TransitionRow{EventID: fmt.Sprintf("ev-%s-%s", key, kind), RunID: fmt.Sprintf("run-%d-%d", s, i),
					RunAt: at, Kind: kind, Raw: true, Stable: true, Notify: kind == "open", EntityKey: key, EntityKind: "slot",
					Provider: provider, Venue: venue, VenueName: "Venue " + venue, ScopeKey: scope, SourceID: "src", LastSeen: at})
			}
			first := clickhouse.SessionRow{SessionID: "s1-" + key, EntityKey: key, Provider: provider, Venue: venue, ScopeKey: scope,
				OpenRunID: "r0", OpenedAt: opened}
			done := first
			done.Closed, done.ClosedAt, done.CloseRunID, done.Duration = true, closed, "r1", closed.Sub(opened)
			again := clickhouse.SessionRow{SessionID: "s2-" + key, EntityKey: key, Provider: provider, Venue: venue, ScopeKey: scope,
				OpenRunID: "r2", OpenedAt: closed.Add(time.Hour)}
			sess = append(sess, first, done, again)
		}
	}
	for _, c := range []*clickhouse.Client{w.dist, w.single} {
		for range 2 {
			if err := clickhouse.InsertRuns(ctx, c, runs); err != nil {
				t.Fatal(err)
			}
			if err := clickhouse.InsertTransitions(ctx, c, trs); err != nil {
				t.Fatal(err)
			}
			if err := clickhouse.InsertSessions(ctx, c, sess); err != nil {
				t.Fatal(err)
			}
		}
	}
	w.rows.runs, w.rows.transitions, w.rows.sessions = 2*len(runs), 2*len(trs), 2*len(sess)
}

// localCount returns the rows of a table's local table on shard i.
func (w *clusterWorld) localCount(t *testing.T, i int, table string) uint64 {
	t.Helper()
	var n uint64
	if err := w.shards[i].Conn().QueryRow(context.Background(), "SELECT count() FROM "+table+clickhouse.LocalSuffix).Scan(&n); err != nil {
		t.Fatalf("shard %d: count %s: %v", i, table, err)
	}
	return n
}

// TestMigrateCluster_twoShards migrates the embedded schema in cluster mode
// onto two clickhouse-server shards, writes through the Distributed tables
// and reads back through them.
func TestMigrateCluster_twoShards(t *testing.T) {
	began := time.Now()
	w := newClusterWorld(t)
	t.Logf("cluster started and migrated in %v", time.Since(began).Round(time.Millisecond))
	w.load(t)
	t.Run("rows on every shard, exact counts", w.testRowsAndCounts)
	t.Run("rollups and dashboards match a single server", w.testRollups)
	t.Run("rebuild on every shard gives exact rollups", w.testRebuild)
	t.Run("retention drops partitions on every shard", w.testRetention)
}

func (w *clusterWorld) testRowsAndCounts(t *testing.T) {
	ctx := context.Background()

	for table, inserted := range map[string]int{clickhouse.TableRuns: w.rows.runs, clickhouse.TableTransitions: w.rows.transitions, clickhouse.TableSessions: w.rows.sessions} {
		var sum uint64
		for i := range w.shards {
			n := w.localCount(t, i, table)
			if n == 0 {
				t.Errorf("%s: no row on shard %d", table, i)
			}
			sum += n
		}
		if sum != uint64(inserted) {
			t.Errorf("%s: %d rows over the shards, %d inserted", table, sum, inserted)
		}
	}
	// The rows of one entity share a shard.
	for i := range w.shards {
		var split uint64
		q := "SELECT count() FROM (SELECT entity_key FROM " + clickhouse.TableTransitions + clickhouse.LocalSuffix + " GROUP BY entity_key HAVING count() != 4)"
		if err := w.shards[i].Conn().QueryRow(ctx, q).Scan(&split); err != nil || split != 0 {
			t.Errorf("shard %d: %d entities with a part of their transitions elsewhere (%v)", i, split, err)
		}
	}

	for name, c := range map[string]*clickhouse.Client{"cluster": w.dist, "shard 1": w.shards[1], "single server": w.single} {
		if n, err := clickhouse.CountTransitions(ctx, c, clickhouse.Filter{}); err != nil || n != uint64(2*w.entities) {
			t.Errorf("%s: transitions %d, %v; want %d", name, n, err, 2*w.entities)
		}
		if n, err := clickhouse.CountRuns(ctx, c, clickhouse.Filter{Provider: "p1"}); err != nil || n != 16 {
			t.Errorf("%s: runs of p1 %d, %v; want 16", name, n, err)
		}
		want := clickhousetest.SessionCounts{Total: uint64(2 * w.entities), Open: uint64(w.entities), Closed: uint64(w.entities)}
		if got, err := clickhousetest.CountSessions(ctx, c); err != nil || got != want {
			t.Errorf("%s: sessions %+v, %v; want %+v", name, got, err, want)
		}
		key := "p2|v5|2026-01-12|03:00|2"
		if got, err := clickhousetest.EntitySessions(ctx, c, key, 10); err != nil || len(got) != 2 || !got[0].Closed || got[1].Closed {
			t.Errorf("%s: sessions of %s: %+v, %v; want a closed one then an open one", name, key, got, err)
		}
	}
}

// testRollups reads the rollups through the Distributed tables with the
// package's stats queries and wants exactly what a single server holding
// the same rows answers.
func (w *clusterWorld) testRollups(t *testing.T) {
	ctx := context.Background()
	q := func(group string) clickhouse.StatsQuery {
		return clickhouse.StatsQuery{From: w.from, To: w.to, GroupBy: group}
	}
	same := func(what string, f func(c *clickhouse.Client) (any, error)) {
		t.Helper()
		want, err := f(w.single)
		if err != nil {
			t.Fatalf("%s on the single server: %v", what, err)
		}
		got, err := f(w.dist)
		if err != nil {
			t.Fatalf("%s on the cluster: %v", what, err)
		}
		if reflect.ValueOf(want).Len() == 0 {
			t.Errorf("%s: no rows", what)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s on the cluster:\n%+v\nsingle server:\n%+v", what, got, want)
		}
	}
	for _, g := range clickhouse.FlowGroups {
		same("FlowStats by "+g, func(c *clickhouse.Client) (any, error) { return clickhouse.FlowStats(ctx, c, q(g)) })
	}
	for _, g := range []string{clickhouse.GroupDay, clickhouse.GroupProvider, clickhouse.GroupVenue} {
		same("SessionStats by "+g, func(c *clickhouse.Client) (any, error) { return clickhouse.SessionStats(ctx, c, q(g)) })
	}
	same("SourceStats", func(c *clickhouse.Client) (any, error) {
		return clickhousetest.SourceStats(ctx, c, q(clickhouse.GroupSource).From, q(clickhouse.GroupSource).To)
	})
	w.dashboards(t)
}

// dashboards runs the ClickHouse queries of the Grafana dashboards
// (deploy/grafana/dashboards) through the Distributed tables and wants the
// single server's answers.
func (w *clusterWorld) dashboards(t *testing.T) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("..", "deploy", "grafana", "dashboards", "*.json"))
	queries := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, sql := range rawSQL(doc) {
			queries++
			sql = w.expandMacros(sql)
			want, err := queryStrings(w.single, sql)
			if err != nil {
				t.Errorf("%s: dashboard query fails on a single server too: %v\n%s", filepath.Base(f), err, sql)
				continue
			}
			got, err := queryStrings(w.dist, sql)
			if err != nil {
				t.Errorf("%s: dashboard query fails on the cluster: %v\n%s", filepath.Base(f), err, sql)
				continue
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s: dashboard query on the cluster gives\n%v\nthe single server\n%v\n%s", filepath.Base(f), got, want, sql)
			}
		}
	}
	t.Logf("%d dashboard queries of %d files compared", queries, len(files))
}

// rawSQL returns every "rawSql" string of a Grafana dashboard document.
func rawSQL(doc any) []string {
	var out []string
	switch v := doc.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && k == "rawSql" {
				out = append(out, s)
			} else {
				out = append(out, rawSQL(x)...)
			}
		}
	case []any:
		for _, x := range v {
			out = append(out, rawSQL(x)...)
		}
	}
	return out
}

var reTimeFilter = regexp.MustCompile(`\$__timeFilter\(([^)]*)\)`)

// expandMacros replaces the Grafana ClickHouse macros with the world's
// time range.
func (w *clusterWorld) expandMacros(sql string) string {
	from := fmt.Sprintf("toDateTime(%d)", w.from.Unix())
	to := fmt.Sprintf("toDateTime(%d)", w.to.Unix())
	sql = reTimeFilter.ReplaceAllString(sql, "$1 >= "+from+" AND $1 <= "+to)
	return strings.NewReplacer("$__fromTime", from, "$__toTime", to, "$__interval_s", "3600").Replace(sql)
}

// queryStrings runs sql and returns its rows, each formatted as a string.
func queryStrings(c *clickhouse.Client, sql string) ([]string, error) {
	rows, err := c.Conn().Query(context.Background(), sql)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	types := rows.ColumnTypes()
	var out []string
	for rows.Next() {
		vals := make([]any, len(types))
		for i, ct := range types {
			vals[i] = reflect.New(ct.ScanType()).Interface()
		}
		if err := rows.Scan(vals...); err != nil {
			return nil, err
		}
		var b strings.Builder
		for _, v := range vals {
			fmt.Fprintf(&b, "%v|", reflect.ValueOf(v).Elem().Interface())
		}
		out = append(out, b.String())
	}
	return out, rows.Err()
}

// testRebuild empties the rollups of every shard (as when they are created
// after the rows), rebuilds them through the client of one server, and
// reads exact figures through the Distributed tables: every row counted
// once although every batch was inserted twice.
func (w *clusterWorld) testRebuild(t *testing.T) {
	ctx := context.Background()
	rollups, err := clickhouse.RollupTables()
	if err != nil {
		t.Fatal(err)
	}
	for i, sc := range w.shards {
		for _, r := range rollups {
			if err := sc.Conn().Exec(ctx, "TRUNCATE TABLE "+r+clickhouse.LocalSuffix); err != nil {
				t.Fatalf("shard %d: truncate %s: %v", i, r, err)
			}
		}
	}
	q := clickhouse.StatsQuery{From: w.from, To: w.to, GroupBy: clickhouse.GroupProvider}
	if got, err := clickhouse.SessionStats(ctx, w.dist, q); err != nil || len(got) != 0 {
		t.Fatalf("session stats of emptied rollups: %+v, %v", got, err)
	}
	shards := map[string]bool{}
	err = clickhouse.Rebuild(ctx, w.dist, clickhouse.RebuildConfig{Progress: func(s clickhouse.RebuildStep) { shards[s.Shard] = true }})
	if err != nil {
		t.Fatalf("Rebuild: %v", err)
	}
	if len(shards) != 2 || !shards[w.cluster.Addr(0)] || !shards[w.cluster.Addr(1)] {
		t.Errorf("rebuild progress came from %v, want both shards %s and %s", shards, w.cluster.Addr(0), w.cluster.Addr(1))
	}
	stats, err := clickhouse.SessionStats(ctx, w.dist, q)
	if err != nil {
		t.Fatal(err)
	}
	var sessions, closed uint64
	var total time.Duration
	for _, s := range stats {
		sessions, closed, total = sessions+s.Sessions, closed+s.Closed, total+s.TotalDuration
	}
	// Entity e of each of the 12 scopes has one session closed after
	// (e+1) × 17 minutes and one open.
	wantTotal := 12 * 55 * 17 * time.Minute
	if sessions != uint64(2*w.entities) || closed != uint64(w.entities) || total != wantTotal {
		t.Errorf("after rebuild: %d sessions, %d closed, %s in all; want %d, %d, %s", sessions, closed, total, 2*w.entities, w.entities, wantTotal)
	}
	for i := range w.shards {
		if n := w.localCount(t, i, clickhouse.TableSessionsDaily); n == 0 {
			t.Errorf("shard %d: rebuilt %s holds no row", i, clickhouse.TableSessionsDaily)
		}
	}
	if _, err := clickhouse.FlowStats(ctx, w.dist, clickhouse.StatsQuery{From: w.from, To: w.to, GroupBy: clickhouse.FlowGroups[0]}); err != nil {
		t.Errorf("flow stats after rebuild: %v", err)
	}
}

// testRetention enforces retention through the client of one server, in
// June 2026: the January runs and transitions go on both shards, the
// sessions and rollups stay. A dry run first drops nothing.
func (w *clusterWorld) testRetention(t *testing.T) {
	ctx := context.Background()
	june := func() time.Time { return time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC) }
	before := map[string][2]uint64{}
	for _, table := range []string{clickhouse.TableRuns, clickhouse.TableTransitions, clickhouse.TableSessions} {
		before[table] = [2]uint64{w.localCount(t, 0, table), w.localCount(t, 1, table)}
	}
	planned, err := clickhouse.EnforceRetention(ctx, w.dist, clickhouse.RetentionConfig{Now: june, DryRun: true})
	if err != nil {
		t.Fatalf("dry run: %v", err)
	}
	if n := w.localCount(t, 0, clickhouse.TableRuns) + w.localCount(t, 1, clickhouse.TableRuns); n != before[clickhouse.TableRuns][0]+before[clickhouse.TableRuns][1] {
		t.Fatalf("the dry run dropped runs: %d left", n)
	}
	dropped, err := clickhouse.EnforceRetention(ctx, w.dist, clickhouse.RetentionConfig{Now: june})
	if err != nil {
		t.Fatalf("EnforceRetention: %v", err)
	}
	if !slices.Equal(dropped, planned) {
		t.Errorf("dropped %v, the dry run planned %v", dropped, planned)
	}
	perShard := map[string]map[string]bool{}
	for _, d := range dropped {
		if perShard[d.Shard] == nil {
			perShard[d.Shard] = map[string]bool{}
		}
		perShard[d.Shard][d.Table] = true
	}
	for i := range w.shards {
		got := perShard[w.cluster.Addr(i)]
		if !got[clickhouse.TableRuns+clickhouse.LocalSuffix] || !got[clickhouse.TableTransitions+clickhouse.LocalSuffix] || len(got) != 2 {
			t.Errorf("shard %d (%s): dropped partitions of %v, want runs_local and transitions_local", i, w.cluster.Addr(i), got)
		}
		for table, want := range map[string]uint64{clickhouse.TableRuns: 0, clickhouse.TableTransitions: 0, clickhouse.TableSessions: before[clickhouse.TableSessions][i]} {
			if n := w.localCount(t, i, table); n != want {
				t.Errorf("shard %d: %s holds %d rows after retention, want %d", i, table, n, want)
			}
		}
	}
	if n, err := clickhouse.CountTransitions(ctx, w.dist, clickhouse.Filter{}); err != nil || n != 0 {
		t.Errorf("transitions through the Distributed table: %d, %v; want 0", n, err)
	}
	if again, err := clickhouse.EnforceRetention(ctx, w.dist, clickhouse.RetentionConfig{Now: june}); err != nil || len(again) != 0 {
		t.Errorf("second retention: %v, %v; want nothing dropped", again, err)
	}
}
