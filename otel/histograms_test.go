package otel

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
)

// TestHistograms_sameDataAsTheSDK records the same values into a bound
// series and into an SDK histogram of the same name, unit and buckets, in
// two scopes read by one reader, and finds the same metric in each:
// description, temporality, attributes, bounds, bucket counts (a value on
// a bound falls in that bound's bucket), count, sum, min and max.
func TestHistograms_sameDataAsTheSDK(t *testing.T) {
	values := []float64{0, 0.00005, 0.0003, 0.001, 0.0011, 2.5, 10, 11, 0.00005}
	attrs := attribute.NewSet(StageKey.String("enrich"), StreamKey.String("obs"))
	hs := NewHistograms()
	reader := sdkmetric.NewManualReader(sdkmetric.WithProducer(hs))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	h, err := mp.Meter("sdk").Float64Histogram("x.duration", metric.WithDescription("d"), metric.WithUnit(UnitSeconds),
		metric.WithExplicitBucketBoundaries(LatencyBuckets()...))
	if err != nil {
		t.Fatal(err)
	}
	series := hs.Series(instrumentation.Scope{Name: "bound"}, "x.duration", "d", UnitSeconds, LatencyBuckets(), attrs)
	for _, v := range values {
		h.Record(context.Background(), v, metric.WithAttributeSet(attrs))
		series.Record(v)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string][]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		got[sm.Scope.Name] = sm.Metrics
	}
	if len(got["sdk"]) != 1 || len(got["bound"]) != 1 {
		t.Fatalf("scopes %v, want one metric in sdk and in bound", got)
	}
	metricdatatest.AssertEqual(t, got["sdk"][0], got["bound"][0], metricdatatest.IgnoreTimestamp())
}
