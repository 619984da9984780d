package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/internal/testenv"
)

// TestBenchAvailability_smallScaleReportsEveryFigure runs the bench at a
// tiny scale against real servers and checks that it reports each figure,
// and that every notification of the latency run arrived exactly once.
func TestBenchAvailability_smallScaleReportsEveryFigure(t *testing.T) {
	clearEnv(t)
	args := []string{"bench", "availability", "--redis-url", testenv.RedisURL(t),
		"--clickhouse-dsn", testenv.ClickHouseDSN(t), "--partitions", "2",
		"--scopes", "20", "--per-scope", "10", "--runs", "2", "--rate", "200", "--latency-duration", "1s"}
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := dispatch(ctx, args, &stdout, &stderr); err != nil {
		t.Fatalf("bench availability: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{
		"20 scopes × 10 entities = 200",
		"(a) diff: 400 in ",
		"(b) clickhouse: ",
		"(d) redis memory: ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	// 200 observations/s of 10 per snapshot for 1s: 20 snapshots, each
	// confirming the one open of its scope's previous run.
	if !regexp.MustCompile(`\(c\) end to end at 200 observations/s for [^:]+: 20 of 20 notifications, 0 duplicates, p50 `).MatchString(out) {
		t.Errorf("latency line is not 20 of 20 notifications without duplicates:\n%s", out)
	}
	if !strings.Contains(stderr.String(), "baseline run") {
		t.Errorf("no progress lines on stderr:\n%s", stderr.String())
	}
}

func TestBenchAvailability_rejectsMissingServersAndBadFlags(t *testing.T) {
	clearEnv(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no servers", []string{}, "needs a real Redis and ClickHouse"},
		{"no clickhouse", []string{"--redis-url", "redis://127.0.0.1:1/0"}, "--clickhouse-dsn"},
		{"scopes", []string{"--redis-url", "redis://127.0.0.1:1/0", "--clickhouse-dsn", "clickhouse://127.0.0.1:1/x",
			"--scopes", "-1"}, "scopes -1 out of range"},
		{"churn", []string{"--redis-url", "redis://127.0.0.1:1/0", "--clickhouse-dsn", "clickhouse://127.0.0.1:1/x",
			"--churn", "2"}, "churn 2 out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := dispatch(context.Background(), append([]string{"bench", "availability"}, tt.args...), &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("dispatch = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestBenchAvailability_helpListsItsFlags(t *testing.T) {
	clearEnv(t)
	var stdout, stderr bytes.Buffer
	err := dispatch(context.Background(), []string{"bench", "availability", "--help"}, &stdout, &stderr)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("dispatch = %v, want flag.ErrHelp", err)
	}
	flags := flagHelp(stderr.String())
	for _, f := range []string{"scopes", "per-scope", "churn", "runs", "rate", "latency-duration", "redis-url", "clickhouse-dsn", "keep"} {
		if _, ok := flags[f]; !ok {
			t.Errorf("flag -%s not listed:\n%s", f, stderr.String())
		}
	}
	stderr.Reset()
	if err := dispatch(context.Background(), []string{"bench", "--help"}, &stdout, &stderr); err != nil ||
		!strings.Contains(stderr.String(), "availability") {
		t.Fatalf("bench --help = %v, want the availability target listed:\n%s", err, stderr.String())
	}
}
