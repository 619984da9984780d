package avail

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/collector"
	"github.com/dropstream/dropstream/flow"
)

// Learned release times (collector.ReleaseConfig).
const (
	// VarReleaseBurst is the poll interval around a venue's learned
	// release times, or "off".
	VarReleaseBurst = "DROPSTREAM_AVAIL_RELEASE_BURST"
	// ReleaseHistory is how far back the release times are learned from.
	ReleaseHistory = 28 * 24 * time.Hour
)

// releaseVars are the variables of the learned release times.
var releaseVars = []flow.Var{
	{Name: VarReleaseBurst, Default: "5s", Usage: "poll interval from 2 minutes before to 3 minutes after a venue's learned release times (learned from the last 28 days of transitions in ClickHouse; without ClickHouse, off), within the host's rate limit; \"off\" turns learning off"},
}

// releaseConfig reads the learned release times' configuration: off
// without ClickHouse or with VarReleaseBurst "off".
func releaseConfig(s flow.Settings, ch *clickhouse.Client) (collector.ReleaseConfig, error) {
	v := strings.TrimSpace(s.String(VarReleaseBurst))
	if ch == nil || v == "off" {
		return collector.ReleaseConfig{}, nil
	}
	v = cmp.Or(v, "5s")
	burst, err := time.ParseDuration(v)
	if err != nil {
		return collector.ReleaseConfig{}, fmt.Errorf("%s=%q: want a duration such as 5s, or off", VarReleaseBurst, v)
	}
	rc := collector.ReleaseConfig{Learner: ReleaseLearner{ch}, Burst: burst}
	if err := rc.WithDefaults().Validate(); err != nil {
		return collector.ReleaseConfig{}, fmt.Errorf("%s: %w", VarReleaseBurst, err)
	}
	return rc, nil
}

// ReleaseLearner is the collector.ReleaseLearner over ClickHouse: per
// source, venue and date, the first raw open not of a baseline.
type ReleaseLearner struct {
	CH *clickhouse.Client
}

// releaseQuery finds the first opens. argMin(baseline, …) is the baseline
// flag of the first open.
const releaseQuery = `SELECT source_id, venue, date, toUnixTimestamp(min(run_at)) AS first, argMin(baseline, run_at) AS base
FROM transitions
WHERE kind = 'open' AND raw = 1 AND venue != '' AND run_at >= now() - ?
GROUP BY source_id, venue, date
HAVING base = 0 AND first >= toUnixTimestamp(now()) - ?
LIMIT ?`

// ReleaseObservations reads the first opens of new dates.
func (l ReleaseLearner) ReleaseObservations(ctx context.Context) ([]collector.ReleaseObservation, error) {
	window := int64(ReleaseHistory / time.Second)
	args := []any{window + 7*24*3600, window, collector.MaxReleaseObservations}
	return clickhouse.QueryRows(ctx, l.CH, "release times", releaseQuery, args, func(rows driver.Rows) (collector.ReleaseObservation, error) {
		var o collector.ReleaseObservation
		var first uint32
		var base uint8
		err := rows.Scan(&o.SourceID, &o.Venue, &o.Date, &first, &base)
		o.At = time.Unix(int64(first), 0).UTC()
		return o, err
	})
}
