package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/dropstream/dropstream/internal/testenv"
)

// TestMigrate_createsSchemaOnceAndReportsProgress runs migrate twice against
// a real ClickHouse: the first run applies every migration with a progress
// line each, the second applies none.
func TestMigrate_createsSchemaOnceAndReportsProgress(t *testing.T) {
	clearEnv(t)
	dsn := testenv.ClickHouseDSN(t)
	var first, second, errOut bytes.Buffer
	if err := dispatch(context.Background(), []string{"migrate", "--clickhouse-dsn", dsn}, &first, &errOut); err != nil {
		t.Fatalf("migrate: %v\n%s", err, errOut.String())
	}
	if !strings.Contains(first.String(), "0001") || strings.Contains(first.String(), ": 0 migration(s) applied") {
		t.Errorf("first migrate printed %q, want progress for 0001 and migrations applied", first.String())
	}
	// Piped, the progress is a line at the phase's start and one at its end.
	if !regexp.MustCompile(`(?m)^migrate: started, \d+ to do\n(.*\n)*migrate: done, \d+/\d+ in .*, [1-9]\d* applied now$`).MatchString(errOut.String()) {
		t.Errorf("first migrate's stderr %q, want its start and end lines", errOut.String())
	}
	if err := dispatch(context.Background(), []string{"migrate", "--clickhouse-dsn", dsn}, &second, &errOut); err != nil {
		t.Fatalf("second migrate: %v", err)
	}
	if !strings.Contains(second.String(), "schema up to date: 0 migration(s) applied") {
		t.Errorf("second migrate printed %q, want nothing applied", second.String())
	}
}

func TestMigrate_needsDSN(t *testing.T) {
	clearEnv(t)
	var out, errOut bytes.Buffer
	err := dispatch(context.Background(), []string{"migrate"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "DROPSTREAM_CLICKHOUSE_DSN") {
		t.Errorf("migrate without a DSN: %v, want an error naming DROPSTREAM_CLICKHOUSE_DSN", err)
	}
}
