package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/clickhouse/clickhousetest"
	"github.com/dropstream/dropstream/internal/testenv"
)

// analyticsDB migrates a fresh database and writes one transition and one
// run in January 2020 and one of each now.
func analyticsDB(t *testing.T) (string, *clickhouse.Client) {
	t.Helper()
	dsn := testenv.ClickHouseDSN(t)
	var out, errOut bytes.Buffer
	if err := dispatch(context.Background(), []string{"migrate", "--clickhouse-dsn", dsn}, &out, &errOut); err != nil {
		t.Fatalf("migrate: %v\n%s", err, errOut.String())
	}
	ch, err := clickhouse.Open(t.Context(), clickhouse.Config{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ch.Close() })
	for i, at := range []time.Time{time.Date(2020, 1, 5, 10, 0, 0, 0, time.UTC), time.Now().UTC()} {
		id := []string{"old", "new"}[i]
		if err := clickhouse.InsertTransitions(t.Context(), ch, []clickhouse.TransitionRow{{EventID: id, RunID: id, RunAt: at,
			Kind: "open", Raw: true, EntityKey: "k", Provider: "p", Venue: "v", ScopeKey: "s", LastSeen: at}}); err != nil {
			t.Fatal(err)
		}
		if err := clickhouse.InsertRuns(t.Context(), ch, []clickhouse.RunRow{{RunID: id, SourceID: "src", RunAt: at, StartedAt: at,
			Status: "failed", Applied: true}}); err != nil {
			t.Fatal(err)
		}
	}
	return dsn, ch
}

func countRuns(t *testing.T, ch *clickhouse.Client) uint64 {
	t.Helper()
	n, err := clickhouse.CountRuns(t.Context(), ch, clickhouse.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestRetentionCommand_dryRunThenDrop(t *testing.T) {
	clearEnv(t)
	dsn, ch := analyticsDB(t)
	var out, errOut bytes.Buffer
	if err := dispatch(context.Background(), []string{"retention", "--clickhouse-dsn", dsn, "--dry-run", "--rollups", "forever"}, &out, &errOut); err != nil {
		t.Fatalf("retention --dry-run: %v\n%s", err, errOut.String())
	}
	for _, want := range []string{"would drop runs partition 20200105", "would drop transitions partition 202001", "retention: would drop 2 partition(s)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("dry run printed %q, want %q", out.String(), want)
		}
	}
	if !strings.Contains(errOut.String(), "retention: started\n") || !strings.Contains(errOut.String(), "tables checked, 2 partition(s)") {
		t.Errorf("dry run's stderr %q, want the phase's start and end lines", errOut.String())
	}
	if n := countRuns(t, ch); n != 2 {
		t.Fatalf("dry run left %d runs, want 2", n)
	}
	out.Reset()
	if err := dispatch(context.Background(), []string{"retention", "--clickhouse-dsn", dsn}, &out, &errOut); err != nil {
		t.Fatalf("retention: %v\n%s", err, errOut.String())
	}
	// The rollups' January 2020 partitions go too: 2 years by default.
	if !strings.Contains(out.String(), "retention: dropped 4 partition(s)") {
		t.Errorf("retention printed %q", out.String())
	}
	if n := countRuns(t, ch); n != 1 {
		t.Errorf("%d runs left, want only the new one", n)
	}
}

func TestRetentionCommand_rejectsBadPeriods(t *testing.T) {
	clearEnv(t)
	tests := []struct{ args []string }{
		{[]string{"--runs", "7"}},
		{[]string{"--transitions", "-3d"}},
		{[]string{"--tables", "notifications"}},
		{[]string{"--tables", "bad name=3d"}},
	}
	for _, tt := range tests {
		var out, errOut bytes.Buffer
		args := append([]string{"retention", "--clickhouse-dsn", "clickhouse://127.0.0.1:1/x"}, tt.args...)
		err := dispatch(context.Background(), args, &out, &errOut)
		if err == nil || strings.Contains(err.Error(), "127.0.0.1:1") {
			t.Errorf("%v: error %v, want a period error before connecting", tt.args, err)
		}
	}
}

func TestRollupsRebuild_showsProgressOfTheMonths(t *testing.T) {
	clearEnv(t)
	dsn, ch := analyticsDB(t)
	var out, errOut bytes.Buffer
	if err := dispatch(context.Background(), []string{"rollups", "rebuild", "--clickhouse-dsn", dsn, "--to", "2020-12"}, &out, &errOut); err != nil {
		t.Fatalf("rollups rebuild: %v\n%s", err, errOut.String())
	}
	// Sessions are empty: two tables have January 2020.
	if !strings.Contains(out.String(), "rebuilt 2 month(s)") {
		t.Errorf("rebuild printed %q, want rebuilt 2 month(s)", out.String())
	}
	// stderr is not a terminal: the phase's start and end lines only.
	var lines []string
	for l := range strings.Lines(errOut.String()) {
		if strings.HasPrefix(l, "rebuild rollups") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 2 || lines[0] != "rebuild rollups (table months): started, 2 to do\n" ||
		!strings.HasPrefix(lines[1], "rebuild rollups (table months): done, 2/2 in ") {
		t.Errorf("progress %q, want its start and its end with 2/2", lines)
	}
	q := clickhouse.StatsQuery{From: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2020, 2, 1, 0, 0, 0, 0, time.UTC)}
	src, err := clickhousetest.SourceStats(t.Context(), ch, q.From, q.To)
	if err != nil || len(src) != 1 || src[0].Runs != 1 || src[0].Failures != 1 {
		t.Errorf("source stats after rebuild = %+v, %v; want 1 run, 1 failure", src, err)
	}
	if err := dispatch(context.Background(), []string{"rollups", "rebuild", "--clickhouse-dsn", dsn, "--from", "March"}, &out, &errOut); err == nil {
		t.Error("--from March: no error")
	}
}

func TestRun_retentionServiceDropsOldPartitions(t *testing.T) {
	clearEnv(t)
	dsn, ch := analyticsDB(t)
	t.Setenv("DROPSTREAM_RETENTION_INTERVAL", "1h")
	b := startDispatch(t, "run", "--redis-url", testenv.RedisURL(t), "--clickhouse-dsn", dsn, "--api-addr", "",
		"--stages", retentionService, "--log-format", "text")
	b.waitFor(t, 20*time.Second, func() bool { return countRuns(t, ch) == 1 }, "the old run's partition dropped")
	if err := b.stop(t); err != nil {
		t.Fatalf("run: %v", err)
	}
	if !strings.Contains(b.stderr.String(), "retention dropped a partition") {
		t.Errorf("run did not log the drop:\n%s", b.stderr)
	}
}

func TestParseAge(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"7d", 7 * 24 * time.Hour, true},
		{"36h", 36 * time.Hour, true},
		{"forever", -1, true},
		{"0d", 0, false},
		{"7", 0, false},
		{"-1h", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		got, err := parseAge(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseAge(%q) = %v, %v; want %v ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}
