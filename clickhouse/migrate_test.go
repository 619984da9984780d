package clickhouse_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/dropstream/dropstream/clickhouse"
)

func TestMigrations_embeddedFilesParse(t *testing.T) {
	ms, err := clickhouse.Migrations()
	if err != nil {
		t.Fatalf("Migrations: %v", err)
	}
	if len(ms) == 0 || ms[0].Name != "0001_availability" || ms[0].Version != 1 {
		t.Fatalf("Migrations()[0] = %+v, want 0001_availability", ms)
	}
	for _, m := range ms {
		for i, s := range m.Statements {
			if strings.Contains(s, "--") || strings.HasSuffix(s, ";") || strings.TrimSpace(s) != s {
				t.Errorf("%s statement %d not clean: %q", m.Name, i+1, s)
			}
			// Keep the schema valid on ClickHouse 18.16.
			for _, banned := range []string{"TTL", "LowCardinality", "DateTime64", "Map(", "async_insert"} {
				if strings.Contains(s, banned) {
					t.Errorf("%s statement %d uses %s, which ClickHouse 18.16 lacks", m.Name, i+1, banned)
				}
			}
		}
	}
}

func TestMigrate_appliesOnceAndIsIdempotent(t *testing.T) {
	c := open(t)
	ctx := t.Context()
	var lines []string
	applied, err := clickhouse.Migrate(ctx, c, func(s string) { lines = append(lines, s) })
	if err != nil {
		t.Fatalf("first Migrate: %v", err)
	}
	ms, _ := clickhouse.Migrations()
	if len(applied) != len(ms) || applied[0] != "0001_availability" {
		t.Fatalf("first Migrate applied %v, want all %d migrations", applied, len(ms))
	}
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "applying 0001_availability") {
		t.Fatalf("progress = %q, want applying/applied lines", lines)
	}

	lines = nil
	again, err := clickhouse.Migrate(ctx, c, func(s string) { lines = append(lines, s) })
	if err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	if len(again) != 0 {
		t.Fatalf("second Migrate applied %v, want nothing", again)
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "0 migrations applied now") {
		t.Fatalf("second progress = %q", lines)
	}
	if _, err := clickhouse.Migrate(ctx, c, nil); err != nil {
		t.Fatalf("Migrate with nil progress: %v", err)
	}
	var recorded uint64
	q := "SELECT count() FROM " + clickhouse.MigrationsTable + " FINAL"
	if err := c.Conn().QueryRow(ctx, q).Scan(&recorded); err != nil {
		t.Fatalf("count migrations: %v", err)
	}
	if recorded != uint64(len(ms)) {
		t.Fatalf("%s holds %d rows, want %d", clickhouse.MigrationsTable, recorded, len(ms))
	}
}

func TestMigrate_tablesHaveTheirPartitionAndSortingKeys(t *testing.T) {
	c := open(t)
	ctx := t.Context()
	if _, err := clickhouse.Migrate(ctx, c, nil); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	tests := []struct {
		table     string
		partition string
		sortEnds  string // the sorting key ends with the row's id
		engine    string
	}{
		{clickhouse.TableRuns, "toYYYYMMDD(run_at)", "run_id", "ReplacingMergeTree"},
		{clickhouse.TableTransitions, "toYYYYMM(run_at)", "event_id", "ReplacingMergeTree"},
		{clickhouse.TableSessions, "toYYYYMM(opened_at)", "session_id", "ReplacingMergeTree"},
		{clickhouse.MigrationsTable, "", "version", "ReplacingMergeTree"},
	}
	for _, tt := range tests {
		t.Run(tt.table, func(t *testing.T) {
			var partition, sorting, engine string
			q := `SELECT partition_key, sorting_key, engine FROM system.tables
			WHERE database = currentDatabase() AND name = ?`
			if err := c.Conn().QueryRow(ctx, q, tt.table).Scan(&partition, &sorting, &engine); err != nil {
				t.Fatalf("system.tables: %v", err)
			}
			if partition != tt.partition || !strings.HasSuffix(sorting, tt.sortEnds) || engine != tt.engine {
				t.Fatalf("%s: partition %q sorting %q engine %q, want %q, ...%q, %q",
					tt.table, partition, sorting, engine, tt.partition, tt.sortEnds, tt.engine)
			}
			if tt.table == clickhouse.MigrationsTable {
				return
			}
			rows, err := c.Conn().Query(ctx, `SELECT name FROM system.columns
			WHERE database = currentDatabase() AND table = ?`, tt.table)
			if err != nil {
				t.Fatalf("system.columns: %v", err)
			}
			defer rows.Close()
			var cols []string
			for rows.Next() {
				var n string
				if err := rows.Scan(&n); err != nil {
					t.Fatalf("scan: %v", err)
				}
				cols = append(cols, n)
			}
			if !slices.Contains(cols, "trace_id") {
				t.Fatalf("%s columns %v lack trace_id", tt.table, cols)
			}
		})
	}
}
