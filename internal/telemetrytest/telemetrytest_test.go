package telemetrytest_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/dropstream/dropstream/internal/telemetrytest"
)

func TestMetrics_readsWhatWasRecorded(t *testing.T) {
	mp, collect := telemetrytest.Metrics(t)
	m := mp.Meter("test")
	c, _ := m.Int64Counter("c")
	h, _ := m.Float64Histogram("h")
	ctx := context.Background()
	a := metric.WithAttributes(attribute.String("stage", "a"), attribute.String("outcome", "ok"))
	b := metric.WithAttributes(attribute.String("stage", "b"), attribute.Int("n", 2))
	c.Add(ctx, 2, a)
	c.Add(ctx, 3, b)
	h.Record(ctx, 1, a)
	h.Record(ctx, 2, b)
	h.Record(ctx, 3, b)
	rm := collect()
	for _, tc := range []struct {
		name    string
		want    map[string]string
		counter int64
		hist    uint64
	}{
		{"every point", nil, 5, 3},
		{"one attribute", map[string]string{"stage": "b"}, 3, 2},
		{"two attributes", map[string]string{"stage": "a", "outcome": "ok"}, 2, 1},
		{"a non-string attribute", map[string]string{"n": "2"}, 3, 2},
		{"no match", map[string]string{"stage": "c"}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := telemetrytest.CounterSum(rm, "c", tc.want); got != tc.counter {
				t.Errorf("CounterSum = %d, want %d", got, tc.counter)
			}
			if got := telemetrytest.HistogramCount(rm, "h", tc.want); got != tc.hist {
				t.Errorf("HistogramCount = %d, want %d", got, tc.hist)
			}
		})
	}
	if _, ok := telemetrytest.Find(rm, "missing"); ok {
		t.Error("Find found a metric never recorded")
	}
	if telemetrytest.CounterSum(rm, "h", nil) != 0 || telemetrytest.HistogramCount(rm, "c", nil) != 0 {
		t.Error("a metric of another kind counted")
	}
}
