package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/internal/progress"
	"github.com/dropstream/dropstream/internal/tick"
)

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg Config
	var cluster, shards string
	fs := flagSet("migrate", "Creates or upgrades the ClickHouse schema (embedded, versioned .sql files), showing progress.\n"+
		"With --cluster NAME it creates, on every server of that cluster (remote_servers), local tables\n"+
		"plus Distributed tables of the plain names over them, sharded by entity; no ON CLUSTER DDL or\n"+
		"ZooKeeper is needed. Writers should add insert_distributed_sync=1 to their DSN.", stderr, &cfg, "json")
	envString(fs, &cluster, "cluster", "DROPSTREAM_CLICKHOUSE_CLUSTER", "", "ClickHouse cluster name (remote_servers) to create the schema on; empty: the server of the DSN alone")
	shardDSNsFlag(fs, &shards)
	if err := fs.parse(args); err != nil {
		return err
	}
	if cfg.ClickHouseDSN == "" {
		return errors.New("migrate needs DROPSTREAM_CLICKHOUSE_DSN or --clickhouse-dsn")
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cluster != "" {
		cc := clickhouse.ClusterConfig{Name: cluster, Shards: splitList(shards)}
		res, err := clickhouse.MigrateCluster(ctx, cfg.ClickHouseDSN, cc, func(line string) { fmt.Fprintln(stdout, line) })
		if err != nil {
			return err
		}
		n := 0
		for _, r := range res {
			n += len(r.Applied)
		}
		fmt.Fprintf(stdout, "schema up to date on %d server(s) of cluster %s: %d migration(s) applied\n", len(res), cluster, n)
		return nil
	}
	if shards != "" {
		return errors.New("migrate: --shard-dsns needs --cluster")
	}
	ch, err := clickhouse.Open(ctx, clickhouse.Config{DSN: cfg.ClickHouseDSN})
	if err != nil {
		return err
	}
	defer ch.Close()
	all, err := clickhouse.Migrations()
	if err != nil {
		return err
	}
	// The bar stands at the last migration applied, in version order.
	position := map[string]int64{}
	for i, m := range all {
		position[m.Name] = int64(i + 1)
	}
	ph := progress.New(stderr).Start("migrate", int64(len(all)))
	applied, err := clickhouse.Migrate(ctx, ch, func(line string) {
		fmt.Fprintln(stdout, line)
		if rest, ok := strings.CutPrefix(line, "applied "); ok {
			name, _, _ := strings.Cut(rest, " ")
			ph.Set(position[name])
		}
	})
	if err != nil {
		return err
	}
	ph.Set(int64(len(all)))
	ph.Done(fmt.Sprintf("%d applied now", len(applied)))
	fmt.Fprintf(stdout, "schema up to date: %d migration(s) applied\n", len(applied))
	return nil
}

// shardDSNsFlag declares --shard-dsns (DROPSTREAM_CLICKHOUSE_SHARD_DSNS),
// read by migrate --cluster, retention and rollups rebuild.
func shardDSNsFlag(fs *flags, dst *string) {
	envString(fs, dst, "shard-dsns", "DROPSTREAM_CLICKHOUSE_SHARD_DSNS", "",
		"cluster mode: comma-separated DSNs of every server of the cluster; empty: the hosts system.clusters lists, with the DSN's credentials and database")
}

func runRollups(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg Config
	var from, to, tables, shards string
	verb, _, err := verbFlags("rollups", args, "Usage: dropstream rollups rebuild [--from YYYY-MM] [--to YYYY-MM] [--tables t1,t2] [flags]\n\n"+
		"  rebuild  recomputes the rollup tables from the raw tables, a month at a time,\n"+
		"           showing progress: a backfill after the rollups are first created,\n"+
		"           or a repair after duplicate inserts.",
		"Recomputes rollups from the raw tables, a month at a time, showing progress.", stderr, &cfg, func(fs *flags) {
			fs.StringVar(&from, "from", "", "first month to rebuild, YYYY-MM (default: the oldest)")
			fs.StringVar(&to, "to", "", "last month to rebuild, YYYY-MM (default: the newest)")
			fs.StringVar(&tables, "tables", "", "comma list of rollup tables (default: all)")
			shardDSNsFlag(fs, &shards)
		}, "rebuild")
	if verb == "" {
		return err
	}
	if cfg.ClickHouseDSN == "" {
		return errors.New("rollups rebuild needs DROPSTREAM_CLICKHOUSE_DSN or --clickhouse-dsn")
	}
	rc := clickhouse.RebuildConfig{Shards: splitList(shards), Tables: splitList(tables)}
	for _, m := range []struct {
		s   string
		dst *time.Time
		n   string
	}{{from, &rc.From, "from"}, {to, &rc.To, "to"}} {
		if m.s == "" {
			continue
		}
		t, err := time.Parse("2006-01", m.s)
		if err != nil {
			return fmt.Errorf("--%s %q: want YYYY-MM", m.n, m.s)
		}
		*m.dst = t
	}
	// One phase per server: a bar of the months on a terminal, its start
	// and end lines on stderr otherwise; the total goes to stdout.
	pr := progress.New(stderr)
	var mu sync.Mutex
	phases := map[string]*progress.Phase{}
	rc.Progress = func(s clickhouse.RebuildStep) {
		mu.Lock()
		defer mu.Unlock()
		on := ""
		if s.Shard != "" {
			on = s.Shard + ": "
		}
		ph := phases[s.Shard]
		if s.Table == "" {
			ph.Set(int64(s.Total))
			ph.Done("")
			fmt.Fprintf(stdout, "%srebuilt %d month(s) in %s\n", on, s.Total, s.Elapsed.Round(time.Millisecond))
			return
		}
		if ph == nil {
			ph = pr.With(on).Start("rebuild rollups (table months)", int64(s.Total))
			phases[s.Shard] = ph
		}
		ph.Set(int64(s.Done))
	}
	ch, err := clickhouse.Open(ctx, clickhouse.Config{DSN: cfg.ClickHouseDSN})
	if err != nil {
		return err
	}
	defer ch.Close()
	return clickhouse.Rebuild(ctx, ch, rc)
}

// retentionVars are the variables of the retention periods, read by
// `dropstream retention` (also as flags) and by the retention service of
// `run` (retentionLoop).
var retentionVars = []struct{ flag, env, def, usage string }{
	{"runs", "DROPSTREAM_RETENTION_RUNS", "7d", "keep raw runs this long"},
	{"transitions", "DROPSTREAM_RETENTION_TRANSITIONS", "30d", "keep raw transitions this long"},
	{"sessions", "DROPSTREAM_RETENTION_SESSIONS", "730d", "keep sessions this long"},
	{"rollups", "DROPSTREAM_RETENTION_ROLLUPS", "730d", "keep rollups this long"},
	{"tables", "DROPSTREAM_RETENTION_TABLES", "", "other tables as table=age,table=age (e.g. notifications=90d)"},
}

// parseAge parses a retention period: a whole number of days ("30d"), a Go
// duration ("36h"), or "forever" (kept: -1).
func parseAge(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "forever" {
		return -1, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err == nil && n > 0 && n <= 100*365 {
			return time.Duration(n) * 24 * time.Hour, nil
		}
	} else if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return d, nil
	}
	return 0, fmt.Errorf("retention period %q: want days (30d), a duration (36h) or forever", s)
}

// retentionConfig builds the configuration from the values of retentionVars
// (by flag name).
func retentionConfig(v map[string]string) (clickhouse.RetentionConfig, error) {
	var cfg clickhouse.RetentionConfig
	var errs []error
	for name, p := range map[string]*time.Duration{"runs": &cfg.Runs, "transitions": &cfg.Transitions, "sessions": &cfg.Sessions, "rollups": &cfg.Rollups} {
		d, err := parseAge(v[name])
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
		*p = d
	}
	if t := strings.TrimSpace(v["tables"]); t != "" {
		cfg.Tables = map[string]time.Duration{}
		for item := range strings.SplitSeq(t, ",") {
			name, age, ok := strings.Cut(strings.TrimSpace(item), "=")
			d, err := parseAge(age)
			if !ok || err != nil {
				errs = append(errs, fmt.Errorf("tables: %q: want table=age", item))
				continue
			}
			cfg.Tables[name] = d
		}
	}
	if err := errors.Join(errs...); err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}

// retentionFromEnv is retentionConfig over the variables (or defaults).
func retentionFromEnv() (clickhouse.RetentionConfig, error) {
	v := map[string]string{}
	for _, r := range retentionVars {
		v[r.flag] = r.def
		if s, ok := os.LookupEnv(r.env); ok {
			v[r.flag] = s
		}
	}
	return retentionConfig(v)
}

func runRetention(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg Config
	fs := flagSet("retention", "Drops the ClickHouse partitions older than their table's retention period (whole partitions, never rows).\n"+
		"Periods are days (30d), durations (36h) or forever. `run` applies the same periods every DROPSTREAM_RETENTION_INTERVAL.", stderr, &cfg, "json")
	for _, r := range retentionVars {
		envString(fs, new(string), r.flag, r.env, r.def, r.usage)
	}
	dryRun := fs.Bool("dry-run", false, "list the partitions that would be dropped, drop nothing")
	var shards string
	shardDSNsFlag(fs, &shards)
	if err := fs.parse(args); err != nil {
		return err
	}
	if cfg.ClickHouseDSN == "" {
		return errors.New("retention needs DROPSTREAM_CLICKHOUSE_DSN or --clickhouse-dsn")
	}
	v := map[string]string{}
	for _, r := range retentionVars {
		v[r.flag] = fs.Lookup(r.flag).Value.String()
	}
	rc, err := retentionConfig(v)
	if err != nil {
		return err
	}
	rc.DryRun = *dryRun
	rc.Shards = splitList(shards)
	ch, err := clickhouse.Open(ctx, clickhouse.Config{DSN: cfg.ClickHouseDSN})
	if err != nil {
		return err
	}
	defer ch.Close()
	ph := progress.New(stderr).Start("retention", 0)
	rc.Progress = func(string) { ph.Add(1) }
	dropped, err := clickhouse.EnforceRetention(ctx, ch, rc)
	ph.Done(fmt.Sprintf("tables checked, %d partition(s)", len(dropped)))
	verb := "dropped"
	if rc.DryRun {
		verb = "would drop"
	}
	for _, d := range dropped {
		on := ""
		if d.Shard != "" {
			on = " on " + d.Shard
		}
		fmt.Fprintf(stdout, "%s %s partition %s%s (rows before %s)\n", verb, d.Table, d.PartitionID, on, d.End.Format(time.DateOnly))
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "retention: %s %d partition(s)\n", verb, len(dropped))
	return nil
}

// retentionService names the loop that enforces ClickHouse retention
// inside `run` (selectable with --stages like a stage).
const retentionService = "analytics-retention"

// defaultRetentionInterval is how often `run` enforces retention when
// DROPSTREAM_RETENTION_INTERVAL is unset.
const defaultRetentionInterval = time.Hour

// appServices are the services of the app itself, beside the flows': the
// retention of ClickHouse partitions, with ClickHouse.
func (a *app) appServices() map[string]func(context.Context) error {
	all := map[string]func(context.Context) error{}
	if a.ch == nil || a.retentionInterval <= 0 {
		return all
	}
	ch, cfg, interval := a.ch, a.retention, a.retentionInterval
	all[retentionService] = func(ctx context.Context) error { return retentionLoop(ctx, a, ch, cfg, interval) }
	return all
}

// readRetention reads the retention periods and DROPSTREAM_RETENTION_INTERVAL.
func (a *app) readRetention() error {
	cfg, err := retentionFromEnv()
	if err != nil {
		return fmt.Errorf("analytics: %w", err)
	}
	interval := defaultRetentionInterval
	if s, ok := os.LookupEnv("DROPSTREAM_RETENTION_INTERVAL"); ok {
		if interval, err = time.ParseDuration(s); err != nil || interval < 0 {
			return fmt.Errorf("analytics: DROPSTREAM_RETENTION_INTERVAL=%q: want a duration (0 disables)", s)
		}
	}
	a.retention, a.retentionInterval = cfg, interval
	return nil
}

// retentionLoop enforces retention at once and then every interval until
// ctx ends. A failed round is logged and retried at the next tick: it never
// stops the process.
func retentionLoop(ctx context.Context, a *app, ch *clickhouse.Client, cfg clickhouse.RetentionConfig, interval time.Duration) error {
	tick.Every(ctx, interval, func() {
		dropped, err := clickhouse.EnforceRetention(ctx, ch, cfg)
		for _, d := range dropped {
			a.log.Info("retention dropped a partition", "shard", d.Shard, "table", d.Table, "partition", d.PartitionID, "rows_before", d.End)
		}
		if err != nil && ctx.Err() == nil {
			a.log.Error("retention failed; retrying at the next interval", "err", err, "interval", interval)
		}
	})
	return nil
}
