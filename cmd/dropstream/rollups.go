package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/internal/progress"
)

func runRollups(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if _, ok, err := verbOf("rollups", args, "Usage: dropstream rollups rebuild [--from YYYY-MM] [--to YYYY-MM] [--tables t1,t2] [flags]\n\n"+
		"  rebuild  recomputes the rollup tables from the raw tables, a month at a time,\n"+
		"           showing progress: a backfill after the rollups are first created,\n"+
		"           or a repair after duplicate inserts.", stderr, "rebuild"); !ok {
		return err
	}
	var cfg Config
	fs := flagSet("rollups rebuild", "Recomputes rollups from the raw tables, a month at a time, showing progress.", stderr, &cfg, "json")
	from := fs.String("from", "", "first month to rebuild, YYYY-MM (default: the oldest)")
	to := fs.String("to", "", "last month to rebuild, YYYY-MM (default: the newest)")
	tables := fs.String("tables", "", "comma list of rollup tables (default: all)")
	var shards string
	shardDSNsFlag(fs, &shards)
	if err := fs.parse(args[1:]); err != nil {
		return err
	}
	if cfg.ClickHouseDSN == "" {
		return errors.New("rollups rebuild needs DROPSTREAM_CLICKHOUSE_DSN or --clickhouse-dsn")
	}
	rc := clickhouse.RebuildConfig{Shards: splitList(shards)}
	for _, m := range []struct {
		s   string
		dst *time.Time
		n   string
	}{{*from, &rc.From, "from"}, {*to, &rc.To, "to"}} {
		if m.s == "" {
			continue
		}
		t, err := time.Parse("2006-01", m.s)
		if err != nil {
			return fmt.Errorf("--%s %q: want YYYY-MM", m.n, m.s)
		}
		*m.dst = t
	}
	if *tables != "" {
		for t := range strings.SplitSeq(*tables, ",") {
			rc.Tables = append(rc.Tables, strings.TrimSpace(t))
		}
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
