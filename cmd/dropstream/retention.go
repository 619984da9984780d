package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/internal/progress"
)

// retentionVars are the variables of the retention periods, read by
// `dropstream retention` (also as flags) and by the retention service of
// `run` (flow_analytics.go).
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
	vals := map[string]*string{}
	for _, r := range retentionVars {
		vals[r.flag] = new(string)
		envString(fs, vals[r.flag], r.flag, r.env, r.def, r.usage)
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
	for k, p := range vals {
		v[k] = *p
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
