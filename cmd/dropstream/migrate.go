package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/dropstream/dropstream/clickhouse"
)

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg Config
	fs := flagSet("migrate", "Creates or upgrades the ClickHouse schema (embedded, versioned .sql files), showing progress.", stderr, &cfg, "json")
	if err := fs.parse(args); err != nil {
		return err
	}
	if cfg.ClickHouseDSN == "" {
		return errors.New("migrate needs DROPSTREAM_CLICKHOUSE_DSN or --clickhouse-dsn")
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	ch, err := clickhouse.Open(ctx, clickhouse.Config{DSN: cfg.ClickHouseDSN})
	if err != nil {
		return err
	}
	defer ch.Close()
	applied, err := clickhouse.Migrate(ctx, ch, func(line string) { fmt.Fprintln(stdout, line) })
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "schema up to date: %d migration(s) applied\n", len(applied))
	return nil
}
