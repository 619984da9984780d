package diff

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// venueKCounts returns dropstream.diff.venue_k by its k attribute.
func venueKCounts(t *testing.T, reader *sdkmetric.ManualReader) map[int64]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[int64]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != MetricVenueK {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				k, _ := dp.Attributes.Value(attribute.Key("k"))
				out[k.AsInt64()] += dp.Value
			}
		}
	}
	return out
}

// TestStage_perVenueStabilizationShowsEachVenuesK: with WithPerVenueK the
// stage applies per-venue stabilization (a steady venue's new slot is
// stable on the run that first shows it) and counts the venues by the k
// chosen in dropstream.diff.venue_k; without it the counter stays empty
// and the snapshot's k holds.
func TestStage_perVenueStabilizationShowsEachVenuesK(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
		on   bool
	}{{"on", []Option{WithPerVenueK(4)}, true}, {"off", nil, false}} {
		t.Run(tc.name, func(t *testing.T) {
			rdb := testenv.Dial(t, "redis://"+miniredis.RunT(t).Addr())
			topics := avail.NewTopics(2)
			reader := sdkmetric.NewManualReader()
			tel := stream.Telemetry{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)), Logger: quiet}
			stage := NewStage(rdb, topics, tel, tc.opts...)
			stage.Config = steadyConfig()
			startStage(t, rdb, stage, tel)

			const scope = "src-1|steady|2025-07-04|2|"
			const runs = 7
			var ents []avail.Entity
			var msgs []*stream.Message
			for i := 1; i <= runs; i++ {
				ents = append(ents, slot("steady", fmt.Sprintf("1%d:00", i)))
				body, _ := json.Marshal(snapOf(scope, i, 2, ents...))
				msgs = append(msgs, stream.NewMessage(scope, avail.TypeSnapshot, body))
			}
			if err := stream.NewPublisher(rdb, tel).Publish(context.Background(), topics.Snapshots, msgs...); err != nil {
				t.Fatal(err)
			}
			var last []Transition
			testenv.WaitFor(t, waitTimeout, func() bool {
				last = last[:0]
				for _, tr := range transitionsOf(t, rdb, topics, scope) {
					if tr.RunID == fmt.Sprintf("run-%04d", runs) {
						last = append(last, tr)
					}
				}
				return len(last) > 0
			}, "transitions of the last run")
			stableAtOnce := false
			for _, tr := range last {
				if tr.Kind == avail.KindOpen && tr.Raw && tr.Stable {
					stableAtOnce = true
				}
			}
			if stableAtOnce != tc.on {
				t.Errorf("last run's new slot stable on its first run: %v, want %v (transitions %v)", stableAtOnce, tc.on, describeAll(last))
			}
			// The stage counts a run's venues after its script has written
			// the transitions: wait for the count rather than read it once.
			got := venueKCounts(t, reader)
			if tc.on {
				testenv.WaitFor(t, waitTimeout, func() bool {
					got = venueKCounts(t, reader)
					return got[1] > 0 && got[2] > 0
				}, "venues by k never showed the steady venue counted at k=2 (too few opens seen) and then k=1")
			}
			if !tc.on && len(got) != 0 {
				t.Errorf("venues by k %v with the option off, want none", got)
			}
		})
	}
}
