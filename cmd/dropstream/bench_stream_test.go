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

// TestBenchStream_roundsReportEveryModeAndMedians runs two rounds of the
// stream bench at a tiny scale against a real Redis: the second round runs
// the modes in reverse, and still prints every mode, in the order asked,
// with its ratios to the modes of its own round; the medians follow.
func TestBenchStream_roundsReportEveryModeAndMedians(t *testing.T) {
	clearEnv(t)
	out, _ := benchStreamCLI(t, "--messages", "2000", "--rounds", "2", "--modes", "plain,none,carried,sampled")
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "round ") || strings.HasPrefix(l, "median ") {
			lines = append(lines, l)
		}
	}
	rate := `2000 messages in \S+ = \d+ msg/s, [0-9.]+ µs CPU/msg \+ [0-9.]+ µs Redis`
	ratio := `[0-9.]+×`
	var want []*regexp.Regexp
	for _, round := range []string{"1/2", "2/2"} {
		want = append(want,
			regexp.MustCompile(`^round `+round+` throughput plain: +`+rate+`$`),
			regexp.MustCompile(`^round `+round+` throughput none: +`+rate+`, `+ratio+` plain$`),
			regexp.MustCompile(`^round `+round+` throughput carried: +`+rate+`, `+ratio+` plain, `+ratio+` none \(CPU `+ratio+`\)$`),
			regexp.MustCompile(`^round `+round+` throughput sampled: +`+rate+`, `+ratio+` plain, `+ratio+` none \(CPU `+ratio+`\), `+ratio+` carried \(CPU `+ratio+`\)$`))
	}
	want = append(want,
		regexp.MustCompile(`^median of 2 rounds plain: +\d+ msg/s, `+ratio+` none \([0-9.]+–[0-9.]+\)$`),
		regexp.MustCompile(`^median of 2 rounds none: +\d+ msg/s, `+ratio+` plain \([0-9.]+–[0-9.]+\)$`),
		regexp.MustCompile(`^median of 2 rounds carried: +\d+ msg/s, `+ratio+` plain \([0-9.]+–[0-9.]+\), `+ratio+` none`),
		regexp.MustCompile(`^median of 2 rounds sampled: +\d+ msg/s, `+ratio+` plain \([0-9.]+–[0-9.]+\), `+ratio+` none`))
	if len(lines) != len(want) {
		t.Fatalf("got %d round and median lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i, re := range want {
		if !re.MatchString(lines[i]) {
			t.Errorf("line %d = %q, want it to match %q", i+1, lines[i], re)
		}
	}
}

// TestBenchStream_pipedProgressIsTwoLinesPerPhase runs modes of 20,000
// messages (four publish pipelines, many consume updates) with stderr not a
// terminal: each phase writes its start and its end with the full count,
// and nothing in between.
func TestBenchStream_pipedProgressIsTwoLinesPerPhase(t *testing.T) {
	clearEnv(t)
	_, stderr := benchStreamCLI(t, "--messages", "20000", "--rounds", "1", "--modes", "plain,none")
	var got []string
	for l := range strings.Lines(stderr) {
		if strings.HasPrefix(l, "plain ") || strings.HasPrefix(l, "none ") {
			got = append(got, strings.TrimSpace(l))
		}
	}
	var want []*regexp.Regexp
	for _, mode := range []string{"plain", "none"} {
		want = append(want,
			regexp.MustCompile(`^`+mode+` publish: started, 20000 to do$`),
			regexp.MustCompile(`^`+mode+` publish: done, 20000/20000 in \S+$`),
			regexp.MustCompile(`^`+mode+` consume: started, 20000 to do$`),
			regexp.MustCompile(`^`+mode+` consume: done, 20000/20000 in \S+, \d+ msg/s$`))
	}
	if len(got) != len(want) {
		t.Fatalf("%d progress lines, want %d (two per phase):\n%s", len(got), len(want), stderr)
	}
	for i, re := range want {
		if !re.MatchString(got[i]) {
			t.Errorf("progress line %d = %q, want it to match %q", i+1, got[i], re)
		}
	}
}

// benchStreamCLI runs `bench stream` on the test Redis with two partitions
// and no latency run, plus args, and returns its stdout and stderr.
func benchStreamCLI(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	all := append([]string{"bench", "stream", "--redis-url", testenv.RedisURL(t), "--partitions", "2",
		"--duration", "0", "--api-addr", "", "--log-level", "warn"}, args...)
	var outBuf, errBuf bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := dispatch(ctx, all, &outBuf, &errBuf); err != nil {
		t.Fatalf("bench stream: %v\nstdout:\n%s\nstderr:\n%s", err, outBuf.String(), errBuf.String())
	}
	return outBuf.String(), errBuf.String()
}
