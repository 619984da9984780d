package availbench_test

import (
	"context"
	"testing"

	"github.com/dropstream/dropstream/collector"
	"github.com/dropstream/dropstream/flows/avail/availbench"
	"github.com/dropstream/dropstream/internal/testenv"
)

// The release bench learns the simulator's release minute from the history
// days and delivers every notice of every day, at the fixed interval and
// with bursts.
func TestRelease_benchLearnsTheReleaseMinuteAndDeliversEveryNotice(t *testing.T) {
	res, err := availbench.RunRelease(context.Background(), dial(t, testenv.RedisURL(t)), availbench.ReleaseConfig{
		Venues: 4, HistoryDays: 3, LearnedDays: 1, Scale: 120, Telemetry: quietTelemetry()})
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]availbench.ReleaseLatency{"fixed": res.Fixed, "learned": res.Learned} {
		if p.Expected == 0 || p.Received != p.Expected {
			t.Errorf("%s: %d of %d notices", name, p.Received, p.Expected)
		}
	}
	found := false
	for _, p := range res.Peaks {
		// 10:00 released, first seen within an interval after it.
		found = found || (p.Weekday == collector.Daily && p.Minute >= 600 && p.Minute <= 601 && p.Support == 3)
	}
	if !found {
		t.Errorf("peaks %+v: want a daily one at 10:00 or 10:01 seen on 3 days", res.Peaks)
	}
	t.Logf("fixed %+v, learned %+v", res.Fixed, res.Learned)
}
