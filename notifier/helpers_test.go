package notifier

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// waitTimeout bounds every wait of the tests.
const waitTimeout = 20 * time.Second

// backend is a Redis the tests run against; client returns a client on an
// empty database of the test's own.
type backend struct {
	name   string
	client func(t *testing.T) redis.UniversalClient
}

func backends() []backend {
	return []backend{
		{"miniredis", func(t *testing.T) redis.UniversalClient {
			return dial(t, "redis://"+miniredis.RunT(t).Addr())
		}},
		{"redis-server", func(t *testing.T) redis.UniversalClient {
			return dial(t, testenv.RedisURL(t))
		}},
	}
}

// mini returns a client of a fresh miniredis, for pure logic.
func mini(t *testing.T) redis.UniversalClient {
	t.Helper()
	return dial(t, "redis://"+miniredis.RunT(t).Addr())
}

func dial(t testing.TB, url string) redis.UniversalClient {
	t.Helper()
	rdb, err := stream.Dial(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// quiet discards the logs of code under test.
var quiet = slog.New(slog.DiscardHandler)

// metricsReader returns a MeterProvider and a function collecting its data.
func metricsReader(t *testing.T) (*sdkmetric.MeterProvider, func() metricdata.ResourceMetrics) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return mp, func() metricdata.ResourceMetrics {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatalf("collect metrics: %v", err)
		}
		return rm
	}
}

// findMetric returns the metric called name, or false.
func findMetric(rm metricdata.ResourceMetrics, name string) (metricdata.Metrics, bool) {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m, true
			}
		}
	}
	return metricdata.Metrics{}, false
}

// counterValue sums the points of a counter whose attributes include want.
func counterValue(rm metricdata.ResourceMetrics, name string, want map[string]string) int64 {
	m, ok := findMetric(rm, name)
	if !ok {
		return 0
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		return 0
	}
	var n int64
	for _, dp := range sum.DataPoints {
		if hasAttrs(dp.Attributes.ToSlice(), want) {
			n += dp.Value
		}
	}
	return n
}

// histogramCount counts the observations of a histogram whose attributes
// include want.
func histogramCount(rm metricdata.ResourceMetrics, name string, want map[string]string) uint64 {
	m, ok := findMetric(rm, name)
	if !ok {
		return 0
	}
	h, ok := m.Data.(metricdata.Histogram[float64])
	if !ok {
		return 0
	}
	var n uint64
	for _, dp := range h.DataPoints {
		if hasAttrs(dp.Attributes.ToSlice(), want) {
			n += dp.Count
		}
	}
	return n
}

func hasAttrs(kvs []attribute.KeyValue, want map[string]string) bool {
	for k, v := range want {
		found := false
		for _, kv := range kvs {
			if string(kv.Key) == k && kv.Value.String() == v {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}
