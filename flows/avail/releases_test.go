package avail

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/clickhouse/clickhousetest"
	"github.com/dropstream/dropstream/collector"
)

// The learner reads, per source, venue and date, the first open of a new
// date: not a baseline's, not older than the history.
func TestRelease_learnerReadsFirstOpensOfNewDates(t *testing.T) {
	ctx := t.Context()
	ch := clickhousetest.Open(t)
	src := fmt.Sprintf("rel-%d", time.Now().UnixNano())
	now := time.Now().UTC().Truncate(time.Second)
	released := now.Add(-50 * time.Hour)
	row := func(id, date string, at time.Time, kind string, raw, baseline bool) clickhouse.TransitionRow {
		return clickhouse.TransitionRow{EventID: src + id, RunID: "r" + id, RunAt: at, Kind: kind, Raw: raw, Stable: !raw, Baseline: baseline,
			EntityKey: "resy|1001|" + date + "|19:00|2", EntityKind: "slot", Provider: "resy", Venue: "1001", Date: date,
			ScopeKey: src + "|1001", SourceID: src}
	}
	rows := []clickhouse.TransitionRow{
		row("1", "2026-12-01", now.Add(-70*time.Hour), "open", true, true),  // seen at the baseline: not a release
		row("2", "2026-12-01", now.Add(-20*time.Hour), "open", true, false), // reopened later
		row("3", "2026-12-02", released, "open", true, false),               // the release
		row("4", "2026-12-02", released.Add(time.Minute), "open", false, false),
		row("5", "2026-12-02", released.Add(time.Hour), "close", true, false),
		row("6", "2026-12-02", released.Add(3*time.Hour), "open", true, false), // reopened: not first
		row("7", "2026-12-03", now.Add(-40*24*time.Hour), "open", true, false), // older than the history
	}
	if err := clickhouse.InsertTransitions(ctx, ch, rows); err != nil {
		t.Fatal(err)
	}
	obs, err := ReleaseLearner{CH: ch}.ReleaseObservations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var mine []collector.ReleaseObservation
	for _, o := range obs {
		if o.SourceID == src {
			mine = append(mine, o)
		}
	}
	want := []collector.ReleaseObservation{{SourceID: src, Venue: "1001", Date: "2026-12-02", At: released}}
	if !slices.Equal(mine, want) {
		t.Fatalf("observations %+v, want %+v", mine, want)
	}
}
