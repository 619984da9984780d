package clickhouse_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/clickhouse/clickhousetest"
)

func TestViews_parseTheEmbeddedSchema(t *testing.T) {
	views, err := clickhouse.Views()
	if err != nil {
		t.Fatalf("Views: %v", err)
	}
	want := map[string]struct{ target, source, time string }{
		"rollup_flow_hourly_transitions_mv": {clickhouse.TableFlowHourly, clickhouse.TableTransitions, "run_at"},
		"rollup_sessions_daily_mv":          {clickhouse.TableSessionsDaily, clickhouse.TableSessions, "opened_at"},
		"rollup_source_hourly_mv":           {clickhousetest.TableSourceHourly, clickhouse.TableRuns, "run_at"},
	}
	got := map[string]clickhouse.View{}
	for _, v := range views {
		got[v.Name] = v
	}
	for name, w := range want {
		v, ok := got[name]
		if !ok {
			t.Errorf("view %s missing; have %v", name, views)
			continue
		}
		if v.Target != w.target || v.Source != w.source || v.SourceTime != w.time {
			t.Errorf("view %s = target %s source %s time %s, want %v", name, v.Target, v.Source, v.SourceTime, w)
		}
		if len(v.Columns) < 3 {
			t.Errorf("view %s columns %v", name, v.Columns)
		}
	}
	if c := got["rollup_source_hourly_mv"].Columns; !slices.Equal(c, []string{"hour", "source_id", "provider", "runs", "failures"}) {
		t.Errorf("source view columns = %v", c)
	}
}

// fixture is a month of raw rows with known counts, each inserted twice
// (a redelivered batch).
type fixture struct {
	hour time.Time
}

func loadFixture(t *testing.T, c *clickhouse.Client) fixture {
	t.Helper()
	ctx := t.Context()
	hour := time.Date(2024, 3, 10, 14, 0, 0, 0, time.UTC)
	var trs []clickhouse.TransitionRow
	// v0: 3 raw opens (one also stable), 2 raw closes; v1: 1 raw open.
	add := func(i int, venue, kind string, raw, stable bool) {
		r := transitionRow(i, hour.Add(time.Duration(i)*time.Minute))
		r.Venue, r.ScopeKey, r.Kind, r.Raw, r.Stable = venue, "scope-"+venue, kind, raw, stable
		trs = append(trs, r)
	}
	add(1, "v0", "open", true, true)
	add(2, "v0", "open", true, false)
	add(3, "v0", "open", true, false)
	add(4, "v0", "close", true, false)
	add(5, "v0", "close", true, false)
	add(6, "v1", "open", true, false)
	add(7, "v1", "open", false, true)
	var runs []clickhouse.RunRow
	for i := range 5 {
		r := clickhouse.RunRow{RunID: fmt.Sprintf("run-%d", i), SourceID: "src-a", Provider: "resy", ScopeKey: "s",
			StartedAt: hour, RunAt: hour.Add(time.Duration(i) * time.Minute), Status: "ok", Applied: true}
		if i >= 3 {
			r.Status = "failed"
		}
		runs = append(runs, r)
	}
	var sess []clickhouse.SessionRow
	for i, d := range []time.Duration{10 * time.Second, 20 * time.Second, 60 * time.Second} {
		open := clickhouse.SessionRow{SessionID: fmt.Sprintf("s%d", i), EntityKey: fmt.Sprintf("e%d", i), Provider: "resy",
			Venue: "v0", OpenedAt: hour.Add(time.Duration(i) * time.Minute)}
		closed := open
		closed.Closed, closed.ClosedAt, closed.Duration = true, open.OpenedAt.Add(d), d
		sess = append(sess, open, closed)
	}
	sess = append(sess, clickhouse.SessionRow{SessionID: "s-open", EntityKey: "e9", Provider: "resy", Venue: "v0", OpenedAt: hour})
	for range 2 {
		if err := clickhouse.InsertTransitions(ctx, c, trs); err != nil {
			t.Fatal(err)
		}
		if err := clickhouse.InsertRuns(ctx, c, runs); err != nil {
			t.Fatal(err)
		}
		if err := clickhouse.InsertSessions(ctx, c, sess); err != nil {
			t.Fatal(err)
		}
	}
	return fixture{hour: hour}
}

func (f fixture) query(group string) clickhouse.StatsQuery {
	return clickhouse.StatsQuery{From: f.hour.Add(-24 * time.Hour), To: f.hour.Add(24 * time.Hour), GroupBy: group}
}

func checkFixtureStats(t *testing.T, c *clickhouse.Client, f fixture, wantSum time.Duration) {
	t.Helper()
	ctx := t.Context()
	flows, err := clickhouse.FlowStats(ctx, c, f.query(clickhouse.GroupVenue))
	if err != nil {
		t.Fatalf("FlowStats: %v", err)
	}
	want := []clickhouse.FlowStat{
		{Key: clickhouse.StatKey{Value: "v0"}, Opens: 3, Closes: 2, StableOpens: 1},
		{Key: clickhouse.StatKey{Value: "v1"}, Opens: 1, StableOpens: 1},
	}
	if !slices.Equal(flows, want) {
		t.Errorf("FlowStats by venue = %+v, want %+v", flows, want)
	}
	hours, err := clickhouse.FlowStats(ctx, c, f.query(clickhouse.GroupHour))
	if err != nil {
		t.Fatalf("FlowStats: %v", err)
	}
	if len(hours) != 1 || !hours[0].Key.Time.Equal(f.hour) || hours[0].Opens != 4 {
		t.Errorf("FlowStats by hour = %+v, want one hour %v with 4 opens", hours, f.hour)
	}
	src, err := clickhousetest.SourceStats(ctx, c, f.hour.Add(-24*time.Hour), f.hour.Add(24*time.Hour))
	if err != nil {
		t.Fatalf("SourceStats: %v", err)
	}
	if want := []clickhousetest.SourceStat{{SourceID: "src-a", Runs: 5, Failures: 2}}; !slices.Equal(src, want) {
		t.Errorf("SourceStats = %+v, want %+v", src, want)
	}
	ss, err := clickhouse.SessionStats(ctx, c, f.query(clickhouse.GroupDay))
	if err != nil {
		t.Fatalf("SessionStats: %v", err)
	}
	if len(ss) != 1 {
		t.Fatalf("SessionStats = %+v, want one day", ss)
	}
	s := ss[0]
	if s.Sessions != 4 || s.Closed != 3 || s.TotalDuration != wantSum || s.MeanDuration != 30*time.Second {
		t.Errorf("SessionStats = %+v, want 4 sessions, 3 closed, total %v, mean 30s", s, wantSum)
	}
	if s.P50 < 10*time.Second || s.P99 > 60*time.Second || s.P50 > s.P90 {
		t.Errorf("quantiles %v %v %v outside the durations", s.P50, s.P90, s.P99)
	}
}

func TestRollups_viewsCountRedeliveredRowsOnce(t *testing.T) {
	c := migrated(t)
	f := loadFixture(t, c)
	// The views saw every closed row twice: the sum doubles, the counts
	// and the mean do not.
	checkFixtureStats(t, c, f, 2*90*time.Second)
}

func TestRebuild_backfillsEveryRollupAndRepairsSums(t *testing.T) {
	c := migrated(t)
	ctx := t.Context()
	f := loadFixture(t, c)
	tables, err := clickhouse.RollupTables()
	if err != nil {
		t.Fatal(err)
	}
	// As if the views had been created after the rows: empty rollups.
	for _, tb := range tables {
		if err := c.Conn().Exec(ctx, "ALTER TABLE "+tb+" DROP PARTITION ID '202403'"); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := clickhouse.FlowStats(ctx, c, f.query(clickhouse.GroupVenue)); len(got) != 0 {
		t.Fatalf("rollup not emptied: %+v", got)
	}
	var steps []clickhouse.RebuildStep
	if err := clickhouse.Rebuild(ctx, c, clickhouse.RebuildConfig{Progress: func(s clickhouse.RebuildStep) { steps = append(steps, s) }}); err != nil {
		t.Fatalf("Rebuild: %v", err)
	}
	// The fixture has rows in March 2024 for these three only.
	withRows := []string{clickhouse.TableFlowHourly, clickhouse.TableSessionsDaily, clickhousetest.TableSourceHourly}
	if len(steps) != len(withRows)+1 {
		t.Fatalf("progress steps = %+v, want one per table with rows (one month each) and a last one", steps)
	}
	for i, s := range steps[:len(withRows)] {
		if s.Table != withRows[i] || s.Month != 202403 || s.Done != i || s.Total != len(withRows) {
			t.Errorf("step %d = %+v", i, s)
		}
	}
	if last := steps[len(steps)-1]; last.Done != len(withRows) {
		t.Errorf("last step = %+v", last)
	}
	// Rebuilt from the raw rows read with FINAL: the sum is exact.
	checkFixtureStats(t, c, f, 90*time.Second)
	// Rebuilding again changes nothing.
	if err := clickhouse.Rebuild(ctx, c, clickhouse.RebuildConfig{Tables: []string{clickhouse.TableFlowHourly}}); err != nil {
		t.Fatalf("Rebuild again: %v", err)
	}
	checkFixtureStats(t, c, f, 90*time.Second)
}

func TestRebuild_rejectsUnknownTableAndSkipsMonthsOutOfRange(t *testing.T) {
	c := migrated(t)
	ctx := t.Context()
	if err := clickhouse.Rebuild(ctx, c, clickhouse.RebuildConfig{Tables: []string{"transitions"}}); err == nil {
		t.Fatal("Rebuild of a raw table: no error")
	}
	f := loadFixture(t, c)
	var steps int
	cfg := clickhouse.RebuildConfig{From: time.Date(2024, 4, 1, 0, 0, 0, 0, time.UTC), Progress: func(clickhouse.RebuildStep) { steps++ }}
	if err := clickhouse.Rebuild(ctx, c, cfg); err != nil {
		t.Fatal(err)
	}
	if steps != 1 {
		t.Errorf("%d progress calls, want only the final one", steps)
	}
	checkFixtureStats(t, c, f, 2*90*time.Second)
}

func TestStatsQuery_rejectsBadQueries(t *testing.T) {
	c := migrated(t)
	from := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		q    clickhouse.StatsQuery
	}{
		{"no range", clickhouse.StatsQuery{GroupBy: clickhouse.GroupHour}},
		{"reversed range", clickhouse.StatsQuery{From: from, To: from.Add(-time.Hour), GroupBy: clickhouse.GroupHour}},
		{"range too long", clickhouse.StatsQuery{From: from, To: from.Add(clickhouse.MaxStatsRange + time.Hour), GroupBy: clickhouse.GroupHour}},
		{"unknown group", clickhouse.StatsQuery{From: from, To: from.Add(time.Hour), GroupBy: "entity"}},
		{"filter not in rollup", clickhouse.StatsQuery{From: from, To: from.Add(time.Hour), GroupBy: clickhouse.GroupHour, SourceID: "x"}},
		{"limit too big", clickhouse.StatsQuery{From: from, To: from.Add(time.Hour), GroupBy: clickhouse.GroupHour, Limit: clickhouse.MaxStatsRows + 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := clickhouse.FlowStats(t.Context(), c, tt.q)
			if !errors.Is(err, clickhouse.ErrBadStatsQuery) {
				t.Fatalf("FlowStats(%+v) error = %v, want ErrBadStatsQuery", tt.q, err)
			}
		})
	}
}
