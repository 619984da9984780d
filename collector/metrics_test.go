package collector_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/dropstream/dropstream/collector"
	"github.com/dropstream/dropstream/collector/provider"
	"github.com/dropstream/dropstream/collector/simulator"
	"github.com/dropstream/dropstream/collector/simulator/simtest"
)

func (e *env) collect() map[string]metricdata.Metrics {
	e.t.Helper()
	var rm metricdata.ResourceMetrics
	if err := e.metrics.Collect(context.Background(), &rm); err != nil {
		e.t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

func attr(set attribute.Set, key string) string {
	v, _ := set.Value(attribute.Key(key))
	return v.AsString()
}

func TestCollector_metricsCountPollsLatencyAndFailures(t *testing.T) {
	e := newEnv(t, simulator.Config{}, collector.CollectorConfig{})
	e.upsert(e.source("m", provider.Resy, scopeA, scopeB))
	e.upsert(e.source("ok", provider.OpenTable, scopeA))
	e.sim.Fail(simtest.Failure{Mode: simtest.FailServerError, Endpoint: simtest.EndpointResy, Venue: "1002"})
	for range 2 {
		for _, id := range []string{"m", "ok"} {
			if err := e.c.PollOnce(context.Background(), id); err != nil {
				t.Fatal(err)
			}
		}
		e.clock.Advance(time.Second)
	}
	ms := e.collect()

	polls, ok := ms[collector.MetricPolls].Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%s is %T, want an int64 sum", collector.MetricPolls, ms[collector.MetricPolls].Data)
	}
	got := map[[2]string]int64{}
	for _, dp := range polls.DataPoints {
		if _, ok := dp.Attributes.Value("source"); ok {
			t.Errorf("a poll counted by its source id: %v", dp.Attributes.ToSlice())
		}
		got[[2]string{attr(dp.Attributes, "provider"), attr(dp.Attributes, "outcome")}] += dp.Value
	}
	want := map[[2]string]int64{{"resy", "ok"}: 2, {"resy", "failed"}: 2, {"opentable", "ok"}: 2}
	if len(got) != len(want) {
		t.Errorf("polls %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("polls of %v = %d, want %d", k, got[k], v)
		}
	}

	dur := ms[collector.MetricFetchDuration]
	hist, ok := dur.Data.(metricdata.Histogram[float64])
	if !ok || dur.Unit != "s" {
		t.Fatalf("%s is %T in %q, want a float64 histogram in s", collector.MetricFetchDuration, dur.Data, dur.Unit)
	}
	var n uint64
	for _, dp := range hist.DataPoints {
		n += dp.Count
	}
	if n != 6 {
		t.Errorf("%d fetch latencies recorded, want 6", n)
	}

	gauge, ok := ms[collector.MetricConsecutiveFailures].Data.(metricdata.Gauge[int64])
	if !ok {
		t.Fatalf("%s is %T, want an int64 gauge", collector.MetricConsecutiveFailures, ms[collector.MetricConsecutiveFailures].Data)
	}
	failures := map[string]int64{}
	for _, dp := range gauge.DataPoints {
		failures[attr(dp.Attributes, "provider")] = dp.Value
	}
	// m's scopes alternate ok and failed: each failure follows a success.
	if failures["resy"] != 1 || failures["opentable"] != 0 || len(failures) != 2 {
		t.Errorf("consecutive failures %v, want resy:1 opentable:0", failures)
	}
}
