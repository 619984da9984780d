package clickhouse

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/dropstream/dropstream/internal/settings"
	"github.com/dropstream/dropstream/internal/tick"
)

// RetentionConfig says how long each table keeps its rows: a partition goes
// when all of it is older than the period. Zero fields take the defaults; a
// negative period keeps the table forever.
type RetentionConfig struct {
	// Runs is the period of the raw runs table. Default 7 days.
	Runs time.Duration `default:"168h"`
	// Transitions is the period of the raw transitions table. Default 30
	// days.
	Transitions time.Duration `default:"720h"`
	// Sessions is the period of the sessions table. Default 2 years.
	Sessions time.Duration `default:"17520h"`
	// Rollups is the period of every rollup table (RollupTables). Default 2
	// years.
	Rollups time.Duration `default:"17520h"`
	// Tables sets the period of other tables partitioned by toYYYYMM or
	// toYYYYMMDD, by name.
	Tables map[string]time.Duration
	// DryRun lists the partitions that would go without dropping them.
	DryRun bool
	// Shards are the DSNs of every server in cluster mode. Default: the
	// hosts system.clusters lists.
	Shards []string
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Progress, when set, is called after each table of each server is done.
	Progress func(table string)
}

// WithDefaults returns c with zero fields set to their defaults.
func (c RetentionConfig) WithDefaults() RetentionConfig {
	settings.Defaults(&c)
	c.Now = tick.Or(c.Now)
	return c
}

// Validate checks the table names of Tables.
func (c RetentionConfig) Validate() error {
	var errs []error
	if len(c.Shards) > 256 {
		errs = append(errs, fmt.Errorf("clickhouse: retention: %d shard DSNs, at most 256", len(c.Shards)))
	}
	for t := range c.Tables {
		if !identRe.MatchString(t) {
			errs = append(errs, fmt.Errorf("clickhouse: retention: table name %q is not an identifier", t))
		}
	}
	return errors.Join(errs...)
}

// DroppedPartition is one partition removed (or, in a dry run, that would
// be removed) by EnforceRetention.
type DroppedPartition struct {
	// Shard is the server's host:port in cluster mode, else "".
	Shard       string
	Table       string
	PartitionID string
	// End is the end of the partition's span (UTC); every row is older.
	End time.Time
}

// EnforceRetention drops the day or month partitions older than each
// table's period and returns them by table and partition (with an error,
// those dropped so far). In cluster mode it drops them from the local
// tables of every server.
func EnforceRetention(ctx context.Context, c *Client, cfg RetentionConfig) ([]DroppedPartition, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rollups, err := RollupTables()
	if err != nil {
		return nil, err
	}
	periods := map[string]time.Duration{TableRuns: cfg.Runs, TableTransitions: cfg.Transitions, TableSessions: cfg.Sessions}
	for _, t := range rollups {
		periods[t] = cfg.Rollups
	}
	maps.Copy(periods, cfg.Tables)
	now := cfg.Now().UTC()
	var dropped []DroppedPartition
	err = onEveryShard(ctx, c, cfg.Shards, func(shard string, sc *Client) error {
		for _, t := range slices.Sorted(maps.Keys(periods)) {
			if periods[t] < 0 {
				continue
			}
			cutoff := now.Add(-periods[t])
			local, ids, err := partitionIDs(ctx, sc, t)
			if err != nil {
				return err
			}
			for _, id := range ids {
				_, end, err := partitionSpan(id)
				if err != nil || end.After(cutoff) {
					continue
				}
				if !cfg.DryRun {
					if err := sc.conn.Exec(ctx, fmt.Sprintf("ALTER TABLE %s DROP PARTITION ID '%s'", local, id)); err != nil {
						return fmt.Errorf("clickhouse: retention: drop %s partition %s: %w", local, id, err)
					}
				}
				dropped = append(dropped, DroppedPartition{Shard: shard, Table: local, PartitionID: id, End: end})
			}
			if cfg.Progress != nil {
				cfg.Progress(local)
			}
		}
		return nil
	})
	return dropped, err
}

// schemaFS holds the versioned schema, one file per migration.
//
//go:embed schema/*.sql
var schemaFS embed.FS

// MigrationsTable records the applied migrations, one row per version
// after merges (a ReplacingMergeTree).
const MigrationsTable = "schema_migrations"

const createMigrationsTable = `CREATE TABLE IF NOT EXISTS ` + MigrationsTable + ` (
    version    UInt32,
    name       String,
    applied_at DateTime
) ENGINE = ReplacingMergeTree()
ORDER BY version`

// Migration is one embedded schema file, schema/NNNN_name.sql.
type Migration struct {
	// Version is the file's number prefix, unique and increasing.
	Version int
	// Name is the file name without ".sql", e.g. "0001_availability".
	Name string
	// Statements are the file's statements in order, without the
	// separating ";" and without comment lines.
	Statements []string
}

// Migrations returns the embedded migrations ordered by version. It fails if
// a file is misnamed, two files share a version, or a file is empty.
func Migrations() ([]Migration, error) {
	files, err := fs.Glob(schemaFS, "schema/*.sql")
	if err != nil {
		return nil, fmt.Errorf("clickhouse: list schema: %w", err)
	}
	var out []Migration
	for _, f := range files {
		name := strings.TrimSuffix(path.Base(f), ".sql")
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v < 1 {
			return nil, fmt.Errorf("clickhouse: schema file %s: want NNNN_name.sql", f)
		}
		body, err := schemaFS.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("clickhouse: read %s: %w", f, err)
		}
		stmts := splitStatements(string(body))
		if len(stmts) == 0 {
			return nil, fmt.Errorf("clickhouse: schema file %s has no statement", f)
		}
		out = append(out, Migration{Version: v, Name: name, Statements: stmts})
	}
	slices.SortFunc(out, func(a, b Migration) int { return a.Version - b.Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("clickhouse: migrations %s and %s share version %d", out[i-1].Name, out[i].Name, out[i].Version)
		}
	}
	return out, nil
}

// splitStatements drops comment lines ("--" after optional blanks) and
// splits the rest at ";" ending a line. Statements must therefore not hold
// a line ending in ";" inside a string literal.
func splitStatements(sql string) []string {
	var stmts []string
	var cur strings.Builder
	flush := func() {
		if s := strings.TrimSpace(cur.String()); s != "" {
			stmts = append(stmts, s)
		}
		cur.Reset()
	}
	for line := range strings.SplitSeq(sql, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "--") {
			continue
		}
		if body, ok := strings.CutSuffix(strings.TrimRight(line, " \t\r"), ";"); ok {
			cur.WriteString(body)
			flush()
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
	}
	flush()
	return stmts
}

// Migrate applies, in version order, every embedded migration not recorded
// in MigrationsTable, recording each after it succeeds, and returns their
// names. Statements are re-runnable, so an interrupted migration is applied
// again. progress, if not nil, gets a line before and after each.
func Migrate(ctx context.Context, c *Client, progress func(string)) (applied []string, err error) {
	migrations, err := Migrations()
	if err != nil {
		return nil, err
	}
	return migrate(ctx, c, migrations, progress)
}

// migrate applies the migrations not recorded in MigrationsTable, as
// Migrate describes; the statements may have been rewritten (cluster mode).
func migrate(ctx context.Context, c *Client, migrations []Migration, progress func(string)) (applied []string, err error) {
	say := func(format string, args ...any) {
		if progress != nil {
			progress(fmt.Sprintf(format, args...))
		}
	}
	if err := c.conn.Exec(ctx, createMigrationsTable); err != nil {
		return nil, fmt.Errorf("clickhouse: create %s: %w", MigrationsTable, err)
	}
	vs, err := QueryRows(ctx, c, "read "+MigrationsTable, "SELECT DISTINCT version FROM "+MigrationsTable, nil, scanOne[uint32])
	if err != nil {
		return nil, err
	}
	done := map[int]bool{}
	for _, v := range vs {
		done[int(v)] = true
	}
	for _, m := range migrations {
		if done[m.Version] {
			continue
		}
		start := time.Now()
		say("applying %s (%d statements)", m.Name, len(m.Statements))
		for i, stmt := range m.Statements {
			if err := c.conn.Exec(ctx, stmt); err != nil {
				return applied, fmt.Errorf("clickhouse: migration %s, statement %d: %w", m.Name, i+1, err)
			}
		}
		err := insert(ctx, c, MigrationsTable, "INSERT INTO "+MigrationsTable+" (version, name, applied_at)", 1,
			func(b driver.Batch, _ int) error {
				return b.Append(uint32(m.Version), m.Name, time.Now().UTC().Truncate(time.Second))
			})
		if err != nil {
			return applied, err
		}
		applied = append(applied, m.Name)
		say("applied %s in %s", m.Name, time.Since(start).Round(time.Millisecond))
	}
	latest := 0
	for v := range done {
		latest = max(latest, v)
	}
	if n := len(migrations); n > 0 {
		latest = max(latest, migrations[n-1].Version)
	}
	say("schema at version %04d (%d migrations applied now)", latest, len(applied))
	return applied, nil
}

// reDistributed reads the cluster name of a Distributed engine clause.
var reDistributed = regexp.MustCompile(`^Distributed\(\s*'?([A-Za-z_][A-Za-z0-9_]*)'?\s*,`)

// SchemaCluster returns the cluster MigrateCluster created the schema for,
// or "" for a single server's.
func SchemaCluster(ctx context.Context, c *Client) (string, error) {
	engines, err := QueryRows(ctx, c, "engine of "+TableTransitions, `SELECT engine_full FROM system.tables
WHERE database = currentDatabase() AND name = ? AND engine = 'Distributed'`, []any{TableTransitions}, scanOne[string])
	if err != nil || len(engines) == 0 || engines[len(engines)-1] == "" {
		return "", err
	}
	engine := engines[len(engines)-1]
	m := reDistributed.FindStringSubmatch(engine)
	if m == nil {
		return "", fmt.Errorf("clickhouse: %s is Distributed, but its cluster cannot be read from %q", TableTransitions, engine)
	}
	return m[1], nil
}

// onEveryShard runs fn on c's server (shard ""), or in cluster mode on
// every server in turn (dsns, else system.clusters), stopping at the first
// error.
func onEveryShard(ctx context.Context, c *Client, dsns []string, fn func(shard string, sc *Client) error) error {
	cluster, err := SchemaCluster(ctx, c)
	if err != nil {
		return err
	}
	if cluster == "" {
		if len(dsns) > 0 {
			return fmt.Errorf("clickhouse: shard DSNs given, but the schema is not in cluster mode")
		}
		return fn("", c)
	}
	if len(dsns) == 0 {
		if c.dsn == "" {
			return fmt.Errorf("clickhouse: cluster mode needs the shards' DSNs: the client was not opened with a DSN")
		}
		if dsns, err = clusterDSNs(ctx, c.dsn, cluster); err != nil {
			return err
		}
	}
	for _, dsn := range dsns {
		sc, err := Open(ctx, Config{DSN: dsn})
		if err != nil {
			return fmt.Errorf("clickhouse: shard %s: %w", dsnHost(dsn), err)
		}
		err = fn(dsnHost(dsn), sc)
		_ = sc.Close()
		if err != nil {
			return fmt.Errorf("clickhouse: shard %s: %w", dsnHost(dsn), err)
		}
	}
	return nil
}
