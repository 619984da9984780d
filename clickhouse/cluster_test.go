package clickhouse

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestClusterStatements_rewrite(t *testing.T) {
	tests := []struct {
		name    string
		stmts   []string // run in order; the last one is checked
		want    []string
		wantErr string
	}{
		{
			name:  "table becomes local plus distributed, keyed by ORDER BY",
			stmts: []string{"CREATE TABLE IF NOT EXISTS t (a String, b UInt8) ENGINE = ReplacingMergeTree() PARTITION BY b ORDER BY (a, toStartOfHour(b))"},
			want: []string{
				"CREATE TABLE IF NOT EXISTS t_local (a String, b UInt8) ENGINE = ReplacingMergeTree() PARTITION BY b ORDER BY (a, toStartOfHour(b))",
				"CREATE TABLE IF NOT EXISTS t AS t_local ENGINE = Distributed('c1', currentDatabase(), 't_local', cityHash64(a, toStartOfHour(b)))",
			},
		},
		{
			name:  "declared sharding key",
			stmts: []string{"CREATE TABLE transitions (entity_key String, e String) ENGINE = ReplacingMergeTree() ORDER BY (entity_key, e)"},
			want: []string{
				"CREATE TABLE transitions_local (entity_key String, e String) ENGINE = ReplacingMergeTree() ORDER BY (entity_key, e)",
				"CREATE TABLE transitions AS transitions_local ENGINE = Distributed('c1', currentDatabase(), 'transitions_local', cityHash64(entity_key))",
			},
		},
		{
			name:  "single ORDER BY column and no ORDER BY",
			stmts: []string{"CREATE TABLE m (a String) ENGINE = MergeTree() ORDER BY a SETTINGS index_granularity = 8192", "CREATE TABLE n (a String) ENGINE = Memory"},
			want: []string{
				"CREATE TABLE n_local (a String) ENGINE = Memory",
				"CREATE TABLE n AS n_local ENGINE = Distributed('c1', currentDatabase(), 'n_local', rand())",
			},
		},
		{
			name: "view TO a table reads and writes local tables",
			stmts: []string{
				"CREATE TABLE src (a String) ENGINE = MergeTree() ORDER BY a",
				"CREATE TABLE dst (a String, n AggregateFunction(uniqExact, String)) ENGINE = AggregatingMergeTree() ORDER BY a",
				"CREATE MATERIALIZED VIEW IF NOT EXISTS v TO dst AS\nSELECT a, uniqExactState(a) AS src FROM src\nLEFT JOIN other USING a GROUP BY a",
			},
			want: []string{"CREATE MATERIALIZED VIEW IF NOT EXISTS v TO dst_local AS SELECT a, uniqExactState(a) AS src FROM src_local\nLEFT JOIN other USING a GROUP BY a"},
		},
		{
			name: "view with an inner engine gets a distributed table",
			stmts: []string{
				"CREATE TABLE src (a String) ENGINE = MergeTree() ORDER BY a",
				"CREATE MATERIALIZED VIEW v ENGINE = SummingMergeTree() ORDER BY a POPULATE AS SELECT a, count() AS n FROM src GROUP BY a",
			},
			want: []string{
				"CREATE MATERIALIZED VIEW v_local ENGINE = SummingMergeTree() ORDER BY a AS SELECT a, count() AS n FROM src_local GROUP BY a",
				"CREATE TABLE v AS v_local ENGINE = Distributed('c1', currentDatabase(), 'v_local', cityHash64(a))",
			},
		},
		{
			name:  "column change on both, partition change on the local table",
			stmts: []string{"CREATE TABLE t (a String) ENGINE = MergeTree() ORDER BY a", "ALTER TABLE t ADD COLUMN IF NOT EXISTS b UInt8"},
			want:  []string{"ALTER TABLE t_local ADD COLUMN IF NOT EXISTS b UInt8", "ALTER TABLE t ADD COLUMN IF NOT EXISTS b UInt8"},
		},
		{
			name:  "drop partition",
			stmts: []string{"CREATE TABLE t (a String) ENGINE = MergeTree() ORDER BY a", "ALTER TABLE t DROP PARTITION 201901"},
			want:  []string{"ALTER TABLE t_local DROP PARTITION 201901"},
		},
		{
			name:  "optimize",
			stmts: []string{"CREATE TABLE t (a String) ENGINE = MergeTree() ORDER BY a", "OPTIMIZE TABLE t FINAL"},
			want:  []string{"OPTIMIZE TABLE t_local FINAL"},
		},
		{
			name:  "drop table drops both",
			stmts: []string{"CREATE TABLE t (a String) ENGINE = MergeTree() ORDER BY a", "DROP TABLE IF EXISTS t"},
			want:  []string{"DROP TABLE IF EXISTS t", "DROP TABLE IF EXISTS t_local"},
		},
		{
			name:  "statements on unknown tables and plain views pass through",
			stmts: []string{"CREATE TABLE t (a String) ENGINE = MergeTree() ORDER BY a", "CREATE VIEW w AS SELECT a FROM t"},
			want:  []string{"CREATE VIEW w AS SELECT a FROM t"},
		},
		{name: "qualified name", stmts: []string{"CREATE TABLE db.t (a String) ENGINE = Memory"}, wantErr: "database-qualified"},
		{name: "qualified view source", stmts: []string{"CREATE MATERIALIZED VIEW v TO x AS SELECT a FROM db.t"}, wantErr: "database-qualified"},
		{name: "rename", stmts: []string{"RENAME TABLE a TO b"}, wantErr: "RENAME"},
		{name: "create as", stmts: []string{"CREATE TABLE a AS b"}, wantErr: "column list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := ClusterStatements([]Migration{{Version: 1, Name: "0001_x", Statements: tt.stmts}}, "c1")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := out[0][len(out[0])-len(tt.want):]
			if !slices.Equal(got, tt.want) {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n--\n"), strings.Join(tt.want, "\n--\n"))
			}
		})
	}
}

func TestClusterStatements_embeddedSchema(t *testing.T) {
	migrations, err := Migrations()
	if err != nil {
		t.Fatal(err)
	}
	out, err := ClusterStatements(migrations, "dropstream")
	if err != nil {
		t.Fatal(err)
	}
	createTable := regexp.MustCompile(`(?is)^CREATE\s+TABLE\s+(IF\s+NOT\s+EXISTS\s+)?(\w+)\s*\(`)
	for i, m := range migrations {
		for _, stmt := range out[i] {
			if c := createTable.FindStringSubmatch(stmt); c != nil && !strings.HasSuffix(c[2], LocalSuffix) {
				t.Errorf("%s: table %s created with columns but not as a local table", m.Name, c[2])
			}
		}
	}
}

// TestShardingKeys_partOfOrderBy: a ReplacingMergeTree collapses rows of
// equal ORDER BY only within a shard, so a declared sharding key must use
// ORDER BY columns only.
func TestShardingKeys_partOfOrderBy(t *testing.T) {
	migrations, err := Migrations()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, m := range migrations {
		for _, stmt := range m.Statements {
			c := reCreateTable.FindStringSubmatch(stmt)
			if c == nil {
				continue
			}
			key, ok := ShardingKeys[c[2]]
			if !ok {
				continue
			}
			found[c[2]] = true
			cols := regexp.MustCompile(`\w+`).FindAllString(orderBy(c[4]), -1)
			inner := strings.TrimSuffix(strings.TrimPrefix(key, "cityHash64("), ")")
			for _, col := range strings.Split(inner, ",") {
				if !slices.Contains(cols, strings.TrimSpace(col)) {
					t.Errorf("table %s: sharding key %s uses %s, not in ORDER BY %s", c[2], key, col, orderBy(c[4]))
				}
			}
		}
	}
	for table := range ShardingKeys {
		if !found[table] {
			t.Errorf("ShardingKeys names %s, which no migration creates", table)
		}
	}
}
