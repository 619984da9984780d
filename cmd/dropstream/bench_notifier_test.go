package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/internal/testenv"
)

// TestBenchNotifier_smallScaleReportsEveryFigure runs the notifier bench at
// a tiny scale against a real Redis, its webhook sink in another process,
// and checks that it reports each figure and that every request of both
// runs reached the sink exactly once.
func TestBenchNotifier_smallScaleReportsEveryFigure(t *testing.T) {
	clearEnv(t)
	selfIsTestBinary(t)
	args := []string{"bench", "notifier", "--redis-url", testenv.RedisURL(t), "--partitions", "2",
		"--subscribers", "20", "--messages", "300", "--rate", "100", "--duration", "1s", "--concurrency", "8"}
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := dispatch(ctx, args, &stdout, &stderr); err != nil {
		t.Fatalf("bench notifier: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`2 partitions, 20 subscribers, a webhook sink in another process, 1 stage copies, history true`),
		regexp.MustCompile(`throughput: 300 deliveries in \S+ = \d+ deliveries/s, 0 duplicates, \d+ connections`),
		regexp.MustCompile(`cpu per delivery: [0-9.]+ µs in this process .*, [0-9.]+ µs in Redis`),
		regexp.MustCompile(`allocations per delivery: \d+ \(\d+ B\)`),
		regexp.MustCompile(`latency at 100 requests/s for 1s: 100 delivered, 0 duplicates, p50 \S+, p99 \S+`),
	} {
		if !want.MatchString(out) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	// Piped, each phase is one line at its start and one at its end.
	for _, phase := range []string{"throughput: deliveries", "latency: publishing at 100/s", "latency: deliveries"} {
		if strings.Count(stderr.String(), phase+": started") != 1 || strings.Count(stderr.String(), phase+": done") != 1 {
			t.Errorf("stderr lacks one start and one end line of %q:\n%s", phase, stderr.String())
		}
	}
}
