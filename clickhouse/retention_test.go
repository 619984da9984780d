package clickhouse_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/clickhouse/clickhousetest"
)

func TestEnforceRetention_dropsOnlyWholePartitionsPastTheirPeriod(t *testing.T) {
	c := migrated(t)
	ctx := t.Context()
	now := time.Date(2024, 6, 15, 12, 0, 0, 0, time.UTC)
	// Runs on days 2024-06-01 .. 2024-06-15; transitions and sessions in
	// March, April, May and June.
	var runs []clickhouse.RunRow
	for d := 1; d <= 15; d++ {
		at := time.Date(2024, 6, d, 10, 0, 0, 0, time.UTC)
		runs = append(runs, clickhouse.RunRow{RunID: fmt.Sprintf("r%d", d), SourceID: "s", RunAt: at, StartedAt: at, Status: "ok", Applied: true})
	}
	var trs []clickhouse.TransitionRow
	var sess []clickhouse.SessionRow
	for i, m := range []time.Month{3, 4, 5, 6} {
		at := time.Date(2024, m, 10, 0, 0, 0, 0, time.UTC)
		trs = append(trs, transitionRow(i, at))
		sess = append(sess, clickhouse.SessionRow{SessionID: fmt.Sprintf("s%d", i), EntityKey: "e", OpenedAt: at})
	}
	for _, err := range []error{clickhouse.InsertRuns(ctx, c, runs), clickhouse.InsertTransitions(ctx, c, trs), clickhouse.InsertSessions(ctx, c, sess)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	cfg := clickhouse.RetentionConfig{
		Sessions: 60 * 24 * time.Hour, // cutoff 2024-04-16: March goes
		Rollups:  -1,                  // kept forever
		Now:      func() time.Time { return now },
		DryRun:   true,
	}
	planned, err := clickhouse.EnforceRetention(ctx, c, cfg)
	if err != nil {
		t.Fatalf("dry run: %v", err)
	}
	if got := partitions(t, c, clickhouse.TableRuns); len(got) != 15 {
		t.Fatalf("dry run dropped runs partitions: %v", got)
	}
	cfg.DryRun = false
	dropped, err := clickhouse.EnforceRetention(ctx, c, cfg)
	if err != nil {
		t.Fatalf("EnforceRetention: %v", err)
	}
	if !slices.Equal(planned, dropped) {
		t.Errorf("dry run planned %v, run dropped %v", planned, dropped)
	}
	var ids []string
	for _, d := range dropped {
		ids = append(ids, d.Table+"/"+d.PartitionID)
		if !d.End.Before(now) {
			t.Errorf("dropped %v, which ends after now", d)
		}
	}
	// Runs: 7 days back from 06-15 12:00 is 06-08 12:00; days up to 06-07
	// ended before it. Transitions: 30 days is 05-16; March and April
	// ended before it. Sessions: March.
	want := []string{"runs/20240601", "runs/20240602", "runs/20240603", "runs/20240604", "runs/20240605",
		"runs/20240606", "runs/20240607", "sessions/202403", "transitions/202403", "transitions/202404"}
	if !slices.Equal(ids, want) {
		t.Errorf("dropped %v, want %v", ids, want)
	}
	if got := partitions(t, c, clickhouse.TableRuns); len(got) != 8 || got[0] != "20240608" {
		t.Errorf("runs partitions left %v, want 20240608..20240615", got)
	}
	if got := partitions(t, c, clickhouse.TableFlowHourly); !slices.Equal(got, []string{"202403", "202404", "202405", "202406"}) {
		t.Errorf("rollup partitions %v: kept forever, want all four months", got)
	}
	// Nothing more to drop.
	again, err := clickhouse.EnforceRetention(ctx, c, cfg)
	if err != nil || len(again) != 0 {
		t.Errorf("second run dropped %v, %v; want nothing", again, err)
	}
}

func TestRetentionConfig_defaultsAndValidate(t *testing.T) {
	c := clickhouse.RetentionConfig{}.WithDefaults()
	if c.Runs != 7*24*time.Hour || c.Transitions != 30*24*time.Hour || c.Sessions != 730*24*time.Hour || c.Rollups != 730*24*time.Hour || c.Now == nil {
		t.Errorf("defaults = %+v", c)
	}
	if err := (clickhouse.RetentionConfig{Tables: map[string]time.Duration{"x; DROP": time.Hour}}).Validate(); err == nil {
		t.Error("Validate accepted a table name that is not an identifier")
	}
	if err := (clickhouse.RetentionConfig{Tables: map[string]time.Duration{"notifications": time.Hour}}).Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

// TestEnforceRetention_clusterModeDropsLocalPartitions: with runs_local
// behind runs (cluster mode), the parts live in runs_local and that is
// where the partitions go; a rebuild reads and writes the local tables too.
func TestEnforceRetention_clusterModeDropsLocalPartitions(t *testing.T) {
	c := migrated(t)
	ctx := t.Context()
	for _, stmt := range []string{"CREATE TABLE runs_local AS runs", "CREATE TABLE rollup_source_hourly_local AS rollup_source_hourly"} {
		if err := c.Conn().Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC)
	if err := clickhouse.InsertRuns(ctx, c, []clickhouse.RunRow{{RunID: "r1", SourceID: "s", RunAt: old, StartedAt: old, Status: "failed", Applied: true}}); err != nil {
		t.Fatal(err)
	}
	const cols = "run_id, source_id, provider, scope_key, started_at, started_at_ms, run_at, run_at_ms, status, error, observed, opened, closed, applied, trace_id"
	for _, stmt := range []string{"INSERT INTO runs_local (" + cols + ") SELECT " + cols + " FROM runs", "DROP TABLE runs"} {
		if err := c.Conn().Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	if err := clickhouse.Rebuild(ctx, c, clickhouse.RebuildConfig{Tables: []string{clickhousetest.TableSourceHourly}}); err != nil {
		t.Fatalf("Rebuild: %v", err)
	}
	var runs, failures uint64
	if err := c.Conn().QueryRow(ctx, "SELECT uniqExactMerge(runs), uniqExactIfMerge(failures) FROM rollup_source_hourly_local").Scan(&runs, &failures); err != nil {
		t.Fatal(err)
	}
	if runs != 1 || failures != 1 {
		t.Errorf("local rollup after rebuild: %d runs, %d failures; want 1, 1", runs, failures)
	}
	dropped, err := clickhouse.EnforceRetention(ctx, c, clickhouse.RetentionConfig{Now: func() time.Time { return old.AddDate(0, 1, 0) }})
	if err != nil {
		t.Fatal(err)
	}
	if want := []clickhouse.DroppedPartition{{Table: "runs_local", PartitionID: "20240102", End: old.AddDate(0, 0, 1)}}; !slices.Equal(dropped, want) {
		t.Errorf("dropped %v, want %v", dropped, want)
	}
	if got := partitions(t, c, "runs_local"); len(got) != 0 {
		t.Errorf("runs_local partitions left: %v", got)
	}
}
