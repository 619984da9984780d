package e2e

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/flows/sample"
	"github.com/dropstream/dropstream/flows/sample/sampletest"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/stream/streamtest"
)

// TestPause_twoProcessesStopTogetherAndResume runs the sample flow's
// stages in two dropstream processes and pauses sample-enrich with
// `dropstream stage pause`: both processes stop reading, the ticks
// published meanwhile wait as lag, and after `stage resume` every tick
// gives exactly one reading, with every entry accounted for.
func TestPause_twoProcessesStopTogetherAndResume(t *testing.T) {
	bin := buildBinary(t)
	url := testenv.StartRedis(t, testenv.RedisConfig{}).URL()
	rdb := dial(t, url)
	ctx := context.Background()
	const partitions = 2
	topics := sample.NewTopics(partitions)
	var procs []*proc
	for _, id := range []string{"a", "b"} {
		p := startProc(t, bin, "sample-"+id, "run", "--redis-url", url, "--api-addr", "", "--partitions", "2",
			"--log-level", "info", "--instance", id, "--stages", "sample-enrich,sample-sink")
		p.waitStarted(t, sample.StageEnrich, sample.StageSink)
		procs = append(procs, p)
	}
	publish := func(n int64) {
		t.Helper()
		pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if got, err := sampletest.Generate(pctx, stream.NewPublisher(rdb, stream.Telemetry{}), partitions, 100000, 10, n, nil); err != nil || got != n {
			t.Fatalf("Generate = %d, %v; want %d", got, err, n)
		}
	}
	readings := func() int64 {
		var n int64
		for p := range partitions {
			n += rdb.XLen(ctx, topics.Readings.Stream(p)).Val()
		}
		return n
	}
	cli := func(verb string) {
		t.Helper()
		out, err := exec.Command(bin, "stage", verb, "--redis-url", url, "--partitions", "2", sample.StageEnrich).CombinedOutput()
		if err != nil || !strings.Contains(string(out), sample.StageEnrich) {
			t.Fatalf("stage %s = %q, %v", verb, out, err)
		}
	}
	const before, during = 20, 30
	publish(before)
	testenv.WaitFor(t, 30*time.Second, func() bool { return readings() == before }, "readings of the first ticks")

	cli("pause")
	for _, p := range procs {
		p.waitPaused(t, sample.StageEnrich)
	}
	publish(during)
	lag := func() int64 {
		var n int64
		for p := range partitions {
			groups, _ := rdb.XInfoGroups(ctx, topics.Ticks.Stream(p)).Result()
			for _, g := range groups {
				if g.Name == sample.StageEnrich {
					n += g.Lag
				}
			}
		}
		return n
	}
	testenv.WaitFor(t, 30*time.Second, func() bool { return lag() == during }, "the ticks published during the pause waiting as lag")
	if got := readings(); got != before {
		t.Fatalf("a paused stage made %d readings, want %d", got, before)
	}

	cli("resume")
	testenv.WaitFor(t, 30*time.Second, func() bool { return lag() == 0 && readings() >= before+during }, "every tick handled after the resume")
	if got := readings(); got != before+during {
		t.Errorf("%d readings for %d ticks: a tick was lost or handled twice", got, before+during)
	}
	streamtest.AssertConserved(t, rdb, topics.Ticks, sample.StageEnrich)
}
