package otel

import (
	"context"
	"math"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// TestHistograms_sameDataAsTheSDK records the same values into a bound
// series and into an SDK histogram with the same buckets and compares
// what each exports: bounds, bucket counts (a value on a bound falls in
// that bound's bucket), count, sum, min and max.
func TestHistograms_sameDataAsTheSDK(t *testing.T) {
	values := []float64{0, 0.00005, 0.0003, 0.001, 0.0011, 2.5, 10, 11, 0.00005}
	attrs := attribute.NewSet(StageKey.String("enrich"), StreamKey.String("obs"))

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	h, err := mp.Meter(ScopeName).Float64Histogram("x.duration", metric.WithUnit(UnitSeconds),
		metric.WithExplicitBucketBoundaries(LatencyBuckets()...))
	if err != nil {
		t.Fatal(err)
	}
	hs := NewHistograms()
	series := hs.Histogram(instrumentation.Scope{Name: ScopeName}, "x.duration", "", UnitSeconds, LatencyBuckets()).Series(attrs)
	for _, v := range values {
		h.Record(context.Background(), v, metric.WithAttributeSet(attrs))
		series.Record(v)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	want := rm.ScopeMetrics[0].Metrics[0].Data.(metricdata.Histogram[float64]).DataPoints[0]
	sms, err := hs.Produce(context.Background())
	if err != nil || len(sms) != 1 || sms[0].Scope.Name != ScopeName || len(sms[0].Metrics) != 1 {
		t.Fatalf("Produce = %+v, %v; want one scope with one metric", sms, err)
	}
	m := sms[0].Metrics[0]
	hist := m.Data.(metricdata.Histogram[float64])
	if m.Name != "x.duration" || m.Unit != UnitSeconds || hist.Temporality != metricdata.CumulativeTemporality || len(hist.DataPoints) != 1 {
		t.Fatalf("metric %s %s %v with %d points, want x.duration s cumulative with 1", m.Name, m.Unit, hist.Temporality, len(hist.DataPoints))
	}
	got := hist.DataPoints[0]
	if !got.Attributes.Equals(&attrs) {
		t.Errorf("attributes %v, want %v", got.Attributes.ToSlice(), attrs.ToSlice())
	}
	if got.Count != want.Count || got.Sum != want.Sum {
		t.Errorf("count %d sum %v, want the SDK's %d and %v", got.Count, got.Sum, want.Count, want.Sum)
	}
	if len(got.BucketCounts) != len(want.BucketCounts) {
		t.Fatalf("%d buckets, want the SDK's %d", len(got.BucketCounts), len(want.BucketCounts))
	}
	for i := range got.BucketCounts {
		if got.BucketCounts[i] != want.BucketCounts[i] {
			t.Errorf("bucket %d (le %v) = %d, want the SDK's %d", i, bound(got.Bounds, i), got.BucketCounts[i], want.BucketCounts[i])
		}
	}
	gmin, _ := got.Min.Value()
	wmin, _ := want.Min.Value()
	gmax, _ := got.Max.Value()
	wmax, _ := want.Max.Value()
	if gmin != wmin || gmax != wmax {
		t.Errorf("min %v max %v, want the SDK's %v and %v", gmin, gmax, wmin, wmax)
	}
}

func bound(bounds []float64, i int) float64 {
	if i < len(bounds) {
		return bounds[i]
	}
	return math.Inf(1)
}

// TestHistograms_concurrentRecordsAllCounted: copies recording into one
// series at once lose nothing.
func TestHistograms_concurrentRecordsAllCounted(t *testing.T) {
	hs := NewHistograms()
	s := hs.Histogram(instrumentation.Scope{Name: ScopeName}, "x.age", "", UnitSeconds, LatencyBuckets()).Series(attribute.NewSet())
	const writers, each = 4, 5000
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				s.Record(float64(w*each+i) / 1e6)
			}
		}()
	}
	wg.Wait()
	sms, _ := hs.Produce(context.Background())
	p := sms[0].Metrics[0].Data.(metricdata.Histogram[float64]).DataPoints[0]
	const n = writers * each
	if p.Count != n {
		t.Errorf("count %d, want %d", p.Count, n)
	}
	if want := float64(n-1) * n / 2 / 1e6; math.Abs(p.Sum-want) > 1e-6 {
		t.Errorf("sum %v, want %v", p.Sum, want)
	}
}

// TestSetup_boundHistogramsServedAtMetrics: a series of the provider's
// Histograms appears at /metrics as the histogram an SDK instrument of
// that name would give, with its scope label.
func TestSetup_boundHistogramsServedAtMetrics(t *testing.T) {
	clearOTelEnv(t)
	p := setupForTest(t, Config{})
	hs := p.MeterProvider.(*MeterProvider).Histograms()
	s := hs.Histogram(instrumentation.Scope{Name: ScopeName}, MetricStageHandlerDuration, "Handler time.", UnitSeconds,
		LatencyBuckets()).Series(attribute.NewSet(StageKey.String("enrich"), StreamKey.String("obs")))
	s.Record(0.0003)
	s.Record(0.2)

	fam := scrape(t, p)["dropstream_stage_handler_duration_seconds"]
	if fam == nil || fam.GetType() != dto.MetricType_HISTOGRAM || len(fam.GetMetric()) != 1 {
		t.Fatalf("dropstream_stage_handler_duration_seconds = %v, want one histogram series", fam)
	}
	m := fam.GetMetric()[0]
	if h := m.GetHistogram(); h.GetSampleCount() != 2 || math.Abs(h.GetSampleSum()-0.2003) > 1e-9 ||
		len(h.GetBucket()) != len(latencyBuckets)+1 {
		t.Errorf("count %d sum %v with %d buckets, want 2, 0.2003 and %d", h.GetSampleCount(), h.GetSampleSum(),
			len(h.GetBucket()), len(latencyBuckets)+1)
	}
	got := labels(m)
	for k, v := range map[string]string{"stage": "enrich", "stream": "obs", "otel_scope_name": ScopeName} {
		if got[k] != v {
			t.Errorf("label %s = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
}
