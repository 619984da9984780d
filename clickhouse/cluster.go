package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Cluster mode rewrites each statement of the .sql files for every server
// (ClusterStatements): CREATE TABLE t makes a local t_local and a
// Distributed t over it; a materialized view writes t_local from s_local;
// ALTER ... COLUMN runs on both tables, other ALTERs, OPTIMIZE and
// TRUNCATE on t_local; DROP TABLE drops both. Tables are sharded by
// ShardingKeys[t], else cityHash64 of the ORDER BY columns. MigrateCluster
// runs the statements on every server: ON CLUSTER DDL needs ZooKeeper.

// LocalSuffix names the local table t_local behind a Distributed t.
const LocalSuffix = "_local"

// ShardingKeys are the sharding keys of the tables not sharded by their
// whole ORDER BY: an entity's history stays on one shard.
var ShardingKeys = map[string]string{
	TableRuns:        "cityHash64(scope_key)",
	TableTransitions: "cityHash64(entity_key)",
	TableSessions:    "cityHash64(entity_key)",
}

var (
	reCreateTable = regexp.MustCompile(`(?is)^CREATE\s+TABLE\s+(IF\s+NOT\s+EXISTS\s+)?([A-Za-z_][A-Za-z0-9_.]*)\s*\((.*)\)\s*ENGINE\s*=\s*(.*)$`)
	reCreateMV    = regexp.MustCompile(`(?is)^CREATE\s+MATERIALIZED\s+VIEW\s+(IF\s+NOT\s+EXISTS\s+)?([A-Za-z_][A-Za-z0-9_.]*)\s+(.*?)\bAS\s+(SELECT\b.*)$`)
	reMVTo        = regexp.MustCompile(`(?is)^TO\s+([A-Za-z_][A-Za-z0-9_.]*)\s*$`)
	reMVEngine    = regexp.MustCompile(`(?is)^ENGINE\s*=.*$`)
	reAlter       = regexp.MustCompile(`(?is)^ALTER\s+TABLE\s+([A-Za-z_][A-Za-z0-9_.]*)\s+(.*)$`)
	reLocalOnly   = regexp.MustCompile(`(?is)^(OPTIMIZE\s+TABLE|TRUNCATE\s+TABLE(\s+IF\s+EXISTS)?)\s+([A-Za-z_][A-Za-z0-9_.]*)\b(.*)$`)
	reDrop        = regexp.MustCompile(`(?is)^DROP\s+(TABLE|VIEW)\s+(IF\s+EXISTS\s+)?([A-Za-z_][A-Za-z0-9_.]*)\s*$`)
	reRename      = regexp.MustCompile(`(?is)^RENAME\s+TABLE\b`)
	reSource      = regexp.MustCompile(`(?i)\b(FROM|JOIN)(\s+)([A-Za-z_][A-Za-z0-9_]*)\b(\s*\.)?`)
	reOrderBy     = regexp.MustCompile(`(?is)\bORDER\s+BY\s+`)
	reColumn      = regexp.MustCompile(`(?is)\bCOLUMN\b`)
)

// clusterRewriter rewrites statements for cluster mode, sending reads and
// writes of the tables created so far to their local tables.
type clusterRewriter struct {
	cluster string
	tables  map[string]bool // names with a local table behind them
}

// ClusterStatements returns each migration's statements rewritten for the
// cluster. The migrations must be complete and in order. It fails on a
// database-qualified name, RENAME, or a CREATE TABLE without columns.
func ClusterStatements(migrations []Migration, cluster string) ([][]string, error) {
	if !reIdent.MatchString(cluster) {
		return nil, fmt.Errorf("clickhouse: cluster name %q: want letters, digits and _", cluster)
	}
	w := &clusterRewriter{cluster: cluster, tables: map[string]bool{}}
	out := make([][]string, len(migrations))
	for i, m := range migrations {
		for j, stmt := range m.Statements {
			rewritten, err := w.rewrite(strings.TrimSpace(stmt))
			if err != nil {
				return nil, fmt.Errorf("clickhouse: migration %s, statement %d: %w", m.Name, j+1, err)
			}
			out[i] = append(out[i], rewritten...)
		}
	}
	return out, nil
}

var reIdent = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

func (w *clusterRewriter) rewrite(stmt string) ([]string, error) {
	if m := reCreateTable.FindStringSubmatch(stmt); m != nil {
		ifNot, name, cols, engine := m[1], m[2], m[3], m[4]
		if err := plainName(name); err != nil {
			return nil, err
		}
		w.tables[name] = true
		local := name + LocalSuffix
		return []string{
			"CREATE TABLE " + ifNot + local + " (" + cols + ") ENGINE = " + engine,
			w.distributed(ifNot, name, shardingKey(name, engine)),
		}, nil
	}
	if m := reCreateMV.FindStringSubmatch(stmt); m != nil {
		ifNot, name, middle, sel := m[1], m[2], strings.TrimSpace(m[3]), m[4]
		if err := plainName(name); err != nil {
			return nil, err
		}
		sel, err := w.localSources(sel)
		if err != nil {
			return nil, err
		}
		if to := reMVTo.FindStringSubmatch(middle); to != nil {
			target := to[1]
			if err := plainName(target); err != nil {
				return nil, err
			}
			if w.tables[target] {
				target += LocalSuffix
			}
			return []string{"CREATE MATERIALIZED VIEW " + ifNot + name + " TO " + target + " AS " + sel}, nil
		}
		if !reMVEngine.MatchString(middle) {
			return nil, fmt.Errorf("materialized view %s: want TO <table> or ENGINE = ... before AS", name)
		}
		middle = strings.TrimSpace(regexp.MustCompile(`(?is)\s+POPULATE\s*$`).ReplaceAllString(middle, ""))
		w.tables[name] = true
		return []string{
			"CREATE MATERIALIZED VIEW " + ifNot + name + LocalSuffix + " " + middle + " AS " + sel,
			w.distributed(ifNot, name, shardingKey(name, middle)),
		}, nil
	}
	if m := reAlter.FindStringSubmatch(stmt); m != nil {
		name, rest := m[1], m[2]
		if err := plainName(name); err != nil {
			return nil, err
		}
		if !w.tables[name] {
			return []string{stmt}, nil
		}
		local := "ALTER TABLE " + name + LocalSuffix + " " + rest
		if reColumn.MatchString(rest) {
			return []string{local, stmt}, nil // the Distributed table mirrors the columns
		}
		return []string{local}, nil
	}
	if m := reLocalOnly.FindStringSubmatch(stmt); m != nil {
		if err := plainName(m[3]); err != nil {
			return nil, err
		}
		if w.tables[m[3]] {
			return []string{m[1] + " " + m[3] + LocalSuffix + m[4]}, nil
		}
		return []string{stmt}, nil
	}
	if m := reDrop.FindStringSubmatch(stmt); m != nil {
		kind, ifExists, name := m[1], m[2], m[3]
		if err := plainName(name); err != nil {
			return nil, err
		}
		if !w.tables[name] {
			return []string{stmt}, nil
		}
		delete(w.tables, name)
		return []string{"DROP TABLE " + ifExists + name, "DROP " + kind + " " + ifExists + name + LocalSuffix}, nil
	}
	if reRename.MatchString(stmt) {
		return nil, errors.New("RENAME TABLE is not supported in cluster mode")
	}
	if regexp.MustCompile(`(?is)^CREATE\s+TABLE\b`).MatchString(stmt) {
		return nil, errors.New("CREATE TABLE without a column list is not supported in cluster mode")
	}
	return []string{stmt}, nil // views, inserts and the rest read and write the Distributed tables
}

// distributed returns the CREATE TABLE of Distributed name over name_local.
func (w *clusterRewriter) distributed(ifNot, name, key string) string {
	return "CREATE TABLE " + ifNot + name + " AS " + name + LocalSuffix +
		" ENGINE = Distributed('" + w.cluster + "', currentDatabase(), '" + name + LocalSuffix + "', " + key + ")"
}

// localSources points FROM and JOIN at the schema tables' local tables.
func (w *clusterRewriter) localSources(sel string) (string, error) {
	var err error
	out := reSource.ReplaceAllStringFunc(sel, func(s string) string {
		m := reSource.FindStringSubmatch(s)
		if m[4] != "" {
			err = fmt.Errorf("database-qualified source %s.: not supported in cluster mode", m[3])
			return s
		}
		if !w.tables[m[3]] {
			return s
		}
		return m[1] + m[2] + m[3] + LocalSuffix
	})
	return out, err
}

func plainName(name string) error {
	if strings.Contains(name, ".") {
		return fmt.Errorf("table %s: database-qualified names are not supported in cluster mode", name)
	}
	return nil
}

// shardingKey returns the sharding key of table: ShardingKeys, else
// cityHash64 of the ORDER BY columns of its engine clause, else rand().
func shardingKey(table, engine string) string {
	if k, ok := ShardingKeys[table]; ok {
		return k
	}
	cols := orderBy(engine)
	if cols == "" {
		return "rand()"
	}
	return "cityHash64(" + cols + ")"
}

// orderBy returns an engine clause's ORDER BY, "" for none or tuple().
func orderBy(engine string) string {
	loc := reOrderBy.FindStringIndex(engine)
	if loc == nil {
		return ""
	}
	rest := engine[loc[1]:]
	if !strings.HasPrefix(rest, "(") {
		end := strings.IndexAny(rest, " \t\r\n")
		if end < 0 {
			end = len(rest)
		}
		if e := rest[:end]; e != "tuple()" {
			return e
		}
		return ""
	}
	depth := 0
	for i, r := range rest {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return strings.TrimSpace(rest[1:i])
			}
		}
	}
	return ""
}

// ClusterConfig configures MigrateCluster.
type ClusterConfig struct {
	// Name is the cluster's name in remote_servers. Required.
	Name string
	// Shards are the DSNs of every server. Default: the hosts
	// system.clusters lists for Name, with the DSN's credentials.
	Shards []string
}

// Validate reports whether the config is usable.
func (c ClusterConfig) Validate() error {
	if !reIdent.MatchString(c.Name) {
		return fmt.Errorf("clickhouse: cluster name %q: want letters, digits and _", c.Name)
	}
	if len(c.Shards) > 256 {
		return fmt.Errorf("clickhouse: %d shard DSNs, at most 256", len(c.Shards))
	}
	return nil
}

// ShardMigration is what MigrateCluster did on one server.
type ShardMigration struct {
	// Addr is the server's host:port.
	Addr string
	// Applied names the migrations applied there now.
	Applied []string
}

// MigrateCluster creates or upgrades the schema on every server of a
// cluster, recording migrations per server as Migrate does. dsn reaches one
// server; the database must exist on all. It stops at the first failing
// server; running it again resumes. Set insert_distributed_sync=1 in the
// writer's DSN for durable acknowledged inserts.
func MigrateCluster(ctx context.Context, dsn string, cfg ClusterConfig, progress func(string)) ([]ShardMigration, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	migrations, err := Migrations()
	if err != nil {
		return nil, err
	}
	stmts, err := ClusterStatements(migrations, cfg.Name)
	if err != nil {
		return nil, err
	}
	for i := range migrations {
		migrations[i].Statements = stmts[i]
	}
	shards := cfg.Shards
	if len(shards) == 0 {
		if shards, err = clusterDSNs(ctx, dsn, cfg.Name); err != nil {
			return nil, err
		}
	}
	var out []ShardMigration
	for _, shard := range shards {
		res, err := migrateShard(ctx, shard, cfg.Name, migrations, progress)
		if err != nil {
			return out, err
		}
		out = append(out, res)
	}
	return out, nil
}

func migrateShard(ctx context.Context, dsn, cluster string, migrations []Migration, progress func(string)) (ShardMigration, error) {
	res := ShardMigration{Addr: dsnHost(dsn)}
	c, err := Open(ctx, Config{DSN: dsn})
	if err != nil {
		return res, err
	}
	defer c.Close()
	var n uint64
	if err := c.conn.QueryRow(ctx, "SELECT count() FROM system.clusters WHERE cluster = ?", cluster).Scan(&n); err != nil {
		return res, fmt.Errorf("clickhouse: %s: read system.clusters: %w", res.Addr, err)
	}
	if n == 0 {
		return res, fmt.Errorf("clickhouse: %s does not declare cluster %s in remote_servers", res.Addr, cluster)
	}
	say := func(line string) {
		if progress != nil {
			progress(res.Addr + ": " + line)
		}
	}
	res.Applied, err = migrate(ctx, c, migrations, say)
	if err != nil {
		return res, fmt.Errorf("clickhouse: %s: %w", res.Addr, err)
	}
	return res, nil
}

// dsnHost returns the host:port of a DSN, or "?" when it does not parse.
func dsnHost(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "?"
	}
	return u.Host
}

// clusterDSNs returns a DSN per host system.clusters lists on dsn's server.
func clusterDSNs(ctx context.Context, dsn, cluster string) ([]string, error) {
	c, err := Open(ctx, Config{DSN: dsn})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, fmt.Errorf("clickhouse: parse DSN: %w", err)
	}
	hosts, err := QueryRows(ctx, c, "read system.clusters", "SELECT host_address, port FROM system.clusters WHERE cluster = ? ORDER BY shard_num, replica_num",
		[]any{cluster}, func(rows driver.Rows) (string, error) {
			var host string
			var port uint16
			err := rows.Scan(&host, &port)
			return net.JoinHostPort(host, strconv.Itoa(int(port))), err
		})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, h := range hosts {
		shard := *u
		shard.Host = h
		if s := shard.String(); !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("clickhouse: cluster %s is not in system.clusters of the server of the DSN", cluster)
	}
	return out, nil
}
