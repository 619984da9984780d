package writer_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/clickhouse/clickhousetest"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer"
	"github.com/dropstream/dropstream/writer/sink"
)

func TestProjectionConfig_validate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     writer.ProjectionConfig
		wantErr string // "" means valid
	}{
		{name: "zero value takes defaults", cfg: writer.ProjectionConfig{}},
		{name: "explicit", cfg: writer.ProjectionConfig{Partitions: 16, MaxSessions: 5, MaxScan: 100}},
		{name: "too many partitions", cfg: writer.ProjectionConfig{Partitions: stream.MaxPartitions + 1}, wantErr: "partitions"},
		{name: "negative sessions", cfg: writer.ProjectionConfig{MaxSessions: -1}, wantErr: "max sessions"},
		{name: "negative scan", cfg: writer.ProjectionConfig{MaxScan: -1}, wantErr: "max scan"},
		{name: "bad runner", cfg: writer.ProjectionConfig{Runner: stream.RunnerConfig{BatchSize: -1}}, wantErr: "runner"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErr(t, tt.cfg.WithDefaults().Validate(), tt.wantErr)
		})
	}
	d := writer.ProjectionConfig{}.WithDefaults()
	if d.Partitions != 8 || d.MaxSessions != 100 || d.MaxScan != 10_000 {
		t.Fatalf("defaults = %+v", d)
	}
}

func TestAnalyticsConfig_validate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     writer.AnalyticsConfig
		wantErr string
	}{
		{name: "zero value takes defaults", cfg: writer.AnalyticsConfig{}},
		{name: "linger off", cfg: writer.AnalyticsConfig{Batching: sink.Batching{Linger: -1}}},
		{name: "short test timings", cfg: writer.AnalyticsConfig{Batching: sink.Batching{FlushInterval: 50 * time.Millisecond, FlushTimeout: 500 * time.Millisecond}, Runner: stream.RunnerConfig{HandlerTimeout: time.Second}}},
		{name: "batch rows too large", cfg: writer.AnalyticsConfig{Batching: sink.Batching{BatchRows: 2_000_000}}, wantErr: "batch rows"},
		{name: "read ahead too large", cfg: writer.AnalyticsConfig{ReadAhead: sink.MaxReadAhead + 1}, wantErr: "read ahead"},
		{name: "negative read ahead", cfg: writer.AnalyticsConfig{ReadAhead: -1}, wantErr: "read ahead"},
		{name: "negative interval", cfg: writer.AnalyticsConfig{Batching: sink.Batching{FlushInterval: -time.Second}}, wantErr: "must be positive"},
		{name: "linger above interval", cfg: writer.AnalyticsConfig{Batching: sink.Batching{Linger: 2 * time.Second}}, wantErr: "linger"},
		{name: "handler timeout below a flush", cfg: writer.AnalyticsConfig{Runner: stream.RunnerConfig{HandlerTimeout: 5 * time.Second}},
			wantErr: "handler timeout"},
		{name: "claim idle below handler timeout", cfg: writer.AnalyticsConfig{Runner: stream.RunnerConfig{ClaimIdle: 20 * time.Second}},
			wantErr: "claim idle"},
		{name: "transitions batch too large", cfg: writer.AnalyticsConfig{TransitionsBatchSize: 10_001}, wantErr: "transitions batch size"},
		{name: "negative transitions batch", cfg: writer.AnalyticsConfig{TransitionsBatchSize: -1}, wantErr: "transitions batch size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErr(t, tt.cfg.WithDefaults().Validate(), tt.wantErr)
		})
	}
	d := writer.AnalyticsConfig{Runner: stream.RunnerConfig{Retry: stream.RetryConfig{MaxRetries: 3}}}.WithDefaults()
	if d.BatchRows != 100_000 || d.FlushInterval != time.Second ||
		d.Linger != 5*time.Millisecond || d.Runner.HandlerTimeout != sink.DefaultHandlerTimeout ||
		d.Runner.ClaimIdle != 2*sink.DefaultHandlerTimeout ||
		d.Runner.MaxDeliveries != sink.DefaultMaxDeliveries || !d.Runner.Retry.Disabled ||
		d.Runner.BatchSize != writer.DefaultAnalyticsBatchSize || d.TransitionsBatchSize != 1000 {
		t.Fatalf("defaults = %+v", d)
	}
}

func TestAnalytics_stagesReadTransitionEntriesInSmallerBatches(t *testing.T) {
	a, err := writer.NewAnalytics(clickhousetest.Open(t), writer.AnalyticsConfig{TransitionsBatchSize: 300}, stream.Telemetry{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	seen := map[string]int{}
	for _, st := range a.Stages() {
		seen[st.Name] = st.Config.BatchSize
	}
	if seen[writer.StageAnalyticsTransitions] != 300 || seen[writer.StageAnalyticsRuns] != writer.DefaultAnalyticsBatchSize {
		t.Fatalf("batch sizes %v, want transitions 300 and runs %d", seen, writer.DefaultAnalyticsBatchSize)
	}
}

func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("Validate() = %v, want nil", err)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Validate() = %v, want an error containing %q", err, want)
	}
}
