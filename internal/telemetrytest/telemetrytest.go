// Package telemetrytest reads, in tests, the metrics that the code under
// test records through an OpenTelemetry MeterProvider, and its logs (Logs).
package telemetrytest

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	dsotel "github.com/dropstream/dropstream/otel"
)

// Metrics returns a MeterProvider like the one the binary runs with (the
// SDK's, with the otel package's bound histograms) read by a manual reader
// and shut down when the test ends, and a function that collects what it
// recorded so far; a failed collection fails the test. Its embedded SDK
// provider alone records through the metric API.
func Metrics(t testing.TB) (*dsotel.MeterProvider, func() metricdata.ResourceMetrics) {
	t.Helper()
	hist := dsotel.NewHistograms()
	reader := sdkmetric.NewManualReader(sdkmetric.WithProducer(hist))
	mp := &dsotel.MeterProvider{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)), Histograms: hist}
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return mp, func() metricdata.ResourceMetrics {
		t.Helper()
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatalf("collect metrics: %v", err)
		}
		return rm
	}
}

// Find returns the metric called name, or false.
func Find(rm metricdata.ResourceMetrics, name string) (metricdata.Metrics, bool) {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m, true
			}
		}
	}
	return metricdata.Metrics{}, false
}

// CounterSum sums the points of the int64 counter called name whose
// attributes include every key and value of want; 0 when there is none.
func CounterSum(rm metricdata.ResourceMetrics, name string, want map[string]string) int64 {
	m, _ := Find(rm, name)
	sum, _ := m.Data.(metricdata.Sum[int64])
	return total(sum.DataPoints, want, func(dp metricdata.DataPoint[int64]) (attribute.Set, int64) { return dp.Attributes, dp.Value })
}

// HistogramCount counts the observations of the float64 histogram called
// name whose attributes include every key and value of want; 0 when there
// is none.
func HistogramCount(rm metricdata.ResourceMetrics, name string, want map[string]string) uint64 {
	m, _ := Find(rm, name)
	h, _ := m.Data.(metricdata.Histogram[float64])
	return total(h.DataPoints, want, func(dp metricdata.HistogramDataPoint[float64]) (attribute.Set, uint64) {
		return dp.Attributes, dp.Count
	})
}

// total adds the values of the points whose attributes include want.
func total[P any, N int64 | uint64](points []P, want map[string]string, of func(P) (attribute.Set, N)) N {
	var n N
	for _, p := range points {
		if set, v := of(p); HasAttrs(set, want) {
			n += v
		}
	}
	return n
}

// HasAttrs reports whether set holds every key of want with its value
// (compared as strings).
func HasAttrs(set attribute.Set, want map[string]string) bool {
	for k, v := range want {
		got, ok := set.Value(attribute.Key(k))
		if !ok || got.String() != v {
			return false
		}
	}
	return true
}
