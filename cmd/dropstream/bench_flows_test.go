package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/internal/testenv"
)

// TestBenchFlows_printGaugeCPUAndBoundedProgress runs flow bench targets at
// a tiny scale against a real Redis with stderr piped, their clients and
// feed server in processes of their own. Stdout carries the plain go-redis
// gauge and the CPU per item of the process and of Redis, each above zero
// (the offers' also per handler); stderr carries each phase as one start
// line and one end line, however many items it counted.
func TestBenchFlows_printGaugeCPUAndBoundedProgress(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		cpu    *regexp.Regexp
		phases []string
	}{
		{"checkout", []string{"--items", "50", "--users", "50", "--orders", "3000", "--clients", "4",
			"--duration", "1s", "--rate", "200", "--latency-duration", "1s"},
			regexp.MustCompile(`cpu per checkout: ([0-9.]+) µs in this process, ([0-9.]+) µs in Redis \(this process runs the stages and the API; ` +
				`the bench's HTTP clients run in another process\)`),
			[]string{"gauge publish", "gauge consume", "batch_init", "throughput run", "latency run", "consistency check"}},
		{"offers", []string{"--offers", "600", "--products", "30", "--misses", "30", "--hits", "300", "--broad", "2"},
			regexp.MustCompile(`miss with fan-out: 30 searches, .*; cpu per search ([0-9.]+) µs in this process, ([0-9.]+) µs in Redis(?s:.*)` +
				`fan-out per handler: a miss with the standard handler alone \(200 offers, its share\) costs ([0-9.]+) µs in this process, ([0-9.]+) µs in Redis; ` +
				`with all 3, [0-9.]+ µs in this process, [0-9.]+ µs in Redis: each handler beyond the first adds -?[0-9.]+ µs in this process, -?[0-9.]+ µs in Redis`),
			[]string{"gauge publish", "gauge consume", "seed offers", "load handler views", "misses", "broad misses", "hits", "one handler: seed offers", "one handler: misses"}},
		{"feed", []string{"--feeds", "100", "--pollers", "4"},
			regexp.MustCompile(`items: 5000 through the flow in .* items/s; polls published \d+/s\n` +
				`cpu per item: ([0-9.]+) µs in this process, ([0-9.]+) µs in Redis \(polls, parse and stages\)`),
			[]string{"gauge publish", "gauge consume", "define feeds", "poll and deliver"}},
		{"comic", []string{"--subscriptions", "20000", "--matches", "200", "--intake", "40", "--workers", "4"},
			regexp.MustCompile(`matcher stage: \d+ comics/s \(one copy; cpu per comic ([0-9.]+)µs \+ redis ([0-9.]+)µs`),
			[]string{"gauge publish", "gauge consume", "load subscriptions", "match comics"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			selfIsTestBinary(t)
			args := append([]string{"bench", tt.name, "--redis-url", testenv.RedisURL(t), "--partitions", "2",
				"--gauge-messages", "20000"}, tt.args...)
			var stdout, stderr bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := dispatch(ctx, args, &stdout, &stderr); err != nil {
				t.Fatalf("bench %s: %v\nstdout:\n%s\nstderr:\n%s", tt.name, err, stdout.String(), stderr.String())
			}
			out := stdout.String()
			gauge := regexp.MustCompile(`gauge: plain go-redis (\d+) msg/s \(20000 messages`).FindStringSubmatch(out)
			if gauge == nil || positive(t, gauge[1]) <= 0 {
				t.Errorf("stdout lacks a gauge above 0 msg/s:\n%s", out)
			}
			cpu := tt.cpu.FindStringSubmatch(out)
			if cpu == nil {
				t.Errorf("stdout lacks a CPU line (%s):\n%s", tt.cpu, out)
				cpu = []string{""}
			}
			for _, f := range cpu[1:] {
				if positive(t, f) <= 0 {
					t.Errorf("CPU line %q has a figure not above 0", cpu[0])
				}
			}
			lines := map[string][]string{}
			phaseLine := regexp.MustCompile(`^(.+): (started|done)\b`)
			for _, l := range strings.Split(stderr.String(), "\n") {
				if m := phaseLine.FindStringSubmatch(l); m != nil {
					lines[m[1]] = append(lines[m[1]], m[2])
				}
			}
			for _, p := range tt.phases {
				if got := strings.Join(lines[p], ","); got != "started,done" {
					t.Errorf("phase %q wrote %q, want one start and one end line; stderr:\n%s", p, got, stderr.String())
				}
			}
		})
	}
}

// positive parses a figure of a report.
func positive(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("figure %q: %v", s, err)
	}
	return f
}
