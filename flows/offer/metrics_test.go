package offer

import (
	"context"
	"testing"
	"time"

	"github.com/dropstream/dropstream/internal/testenv"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

func TestMetrics_hitRateResultAgeAndFanoutLatency(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	clk := newClock()
	rdb := testenv.Backends()[0].Client(t)
	tel := quiet
	tel.MeterProvider = mp
	s, err := NewWith(ctx, rdb, testConfig(clk), tel)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if _, err := s.Catalog().Put(ctx, SampleOffers(1, 60, 5, s.cfg.Handlers)...); err != nil {
		t.Fatal(err)
	}
	runStages(t, rdb, s.Stages()...)
	runKeeper(t, s)
	req := SearchRequest{Filter: aggFilter([]string{"p1"}, testAgg)}
	for i, want := range []string{OutcomeMiss, OutcomeHit, OutcomeHit, OutcomeHit} {
		if resp, err := s.Search(ctx, req, ""); err != nil || resp.Outcome != want {
			t.Fatalf("search %d = %s, %v; want %s", i, resp.Outcome, err, want)
		}
		clk.advance(5 * time.Second)
	}
	searches, histCount, ageSum := collectOfferMetrics(t, reader)
	// The last handler records the fan-out latency after its answer
	// completed the result, which may be after the search that waited for
	// it has returned.
	testenv.WaitFor(t, 10*time.Second, func() bool {
		searches, histCount, ageSum = collectOfferMetrics(t, reader)
		return histCount[MetricFanoutLatency] > 0
	}, "the fan-out latency recorded")
	if searches[OutcomeHit] != 3 || searches[OutcomeMiss] != 1 {
		t.Errorf("search counts %v, want 3 hits and 1 miss (hit rate 75%%)", searches)
	}
	if histCount[MetricResultAge] != 3 || ageSum != 5+10+15 {
		t.Errorf("result age: %d observations summing %gs, want 3 summing 30s", histCount[MetricResultAge], ageSum)
	}
	if histCount[MetricFanoutLatency] != 1 || histCount[MetricSearchDuration] != 4 {
		t.Errorf("fan-out latency observed %d times (want 1), search duration %d (want 4)", histCount[MetricFanoutLatency], histCount[MetricSearchDuration])
	}
}

// collectOfferMetrics reads the searches by outcome, the observation
// counts of every histogram and the sum of the result ages.
func collectOfferMetrics(t *testing.T, reader *sdkmetric.ManualReader) (map[string]int64, map[string]uint64, float64) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	searches := map[string]int64{}
	histCount := map[string]uint64{}
	var ageSum float64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				if m.Name == MetricSearches {
					for _, p := range d.DataPoints {
						o, _ := p.Attributes.Value(keyOutcome)
						searches[o.AsString()] += p.Value
					}
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					histCount[m.Name] += p.Count
					if m.Name == MetricResultAge {
						ageSum += p.Sum
					}
				}
			}
		}
	}
	return searches, histCount, ageSum
}
