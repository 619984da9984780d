package otel

import (
	"context"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Histograms holds explicit-bucket histogram series, each bound to one
// attribute set when it is created, so that a measurement is a bucket
// search and an uncontended lock: no attribute resolution or map lookup,
// which is most of what the metric SDK spends per measurement. The runtime
// records a message's handler time and age this way for every message.
// The SDK's readers read Histograms as a [sdkmetric.Producer]: its series
// join the same export, under the same names, units and scopes, as
// cumulative histograms from the time the set was created.
//
// Kept beside the SDK's histograms: see BENCHMARKS.md, "Bound histograms
// beside the SDK's".
//
// Its methods are safe for concurrent use.
type Histograms struct {
	start  time.Time
	mu     sync.Mutex
	series map[seriesKey]*Series
	order  []*Series
}

type seriesKey struct {
	scope instrumentation.Scope
	name  string
	attrs attribute.Distinct
}

// NewHistograms returns an empty set.
func NewHistograms() *Histograms {
	return &Histograms{start: time.Now(), series: map[seriesKey]*Series{}}
}

// Series is one histogram's series for one attribute set.
type Series struct {
	scope                   instrumentation.Scope
	name, description, unit string
	attrs                   attribute.Set
	bounds                  []float64

	mu                    sync.Mutex
	counts                []uint64 // len(bounds)+1
	count                 uint64
	sum, minimum, maximum float64
}

// Series returns the series for attrs of the histogram called name in
// scope, creating it with the given description, unit and bucket bounds
// (ascending) on first use; later calls return the first one whatever else
// they pass. Callers keep it and record into it.
func (h *Histograms) Series(scope instrumentation.Scope, name, description, unit string, bounds []float64, attrs attribute.Set) *Series {
	key := seriesKey{scope, name, attrs.Equivalent()}
	h.mu.Lock()
	defer h.mu.Unlock()
	if s, ok := h.series[key]; ok {
		return s
	}
	s := &Series{scope: scope, name: name, description: description, unit: unit, attrs: attrs,
		bounds: slices.Clone(bounds), counts: make([]uint64, len(bounds)+1)}
	h.series[key] = s
	h.order = append(h.order, s)
	return s
}

// Record adds one measurement; it does not allocate. NaN is ignored.
func (s *Series) Record(v float64) {
	if math.IsNaN(v) {
		return
	}
	// A bucket holds values up to and including its upper bound, as the
	// SDK's explicit-bucket histograms do.
	i := sort.SearchFloat64s(s.bounds, v)
	s.mu.Lock()
	if s.count == 0 {
		s.minimum, s.maximum = v, v
	}
	s.minimum, s.maximum = min(s.minimum, v), max(s.maximum, v)
	s.counts[i]++
	s.count++
	s.sum += v
	s.mu.Unlock()
}

// Produce returns each histogram with its series in the order they were
// created, as cumulative data points at the current time.
func (h *Histograms) Produce(context.Context) ([]metricdata.ScopeMetrics, error) {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []metricdata.ScopeMetrics
	for _, s := range h.order {
		si := slices.IndexFunc(out, func(sm metricdata.ScopeMetrics) bool { return sm.Scope == s.scope })
		if si < 0 {
			si = len(out)
			out = append(out, metricdata.ScopeMetrics{Scope: s.scope})
		}
		sm := &out[si]
		mi := slices.IndexFunc(sm.Metrics, func(m metricdata.Metrics) bool { return m.Name == s.name })
		if mi < 0 {
			mi = len(sm.Metrics)
			sm.Metrics = append(sm.Metrics, metricdata.Metrics{Name: s.name, Description: s.description, Unit: s.unit,
				Data: metricdata.Histogram[float64]{Temporality: metricdata.CumulativeTemporality}})
		}
		hist := sm.Metrics[mi].Data.(metricdata.Histogram[float64])
		hist.DataPoints = append(hist.DataPoints, s.point(h.start, now))
		sm.Metrics[mi].Data = hist
	}
	return out, nil
}

func (s *Series) point(start, now time.Time) metricdata.HistogramDataPoint[float64] {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := metricdata.HistogramDataPoint[float64]{Attributes: s.attrs, StartTime: start, Time: now, Count: s.count,
		Bounds: slices.Clone(s.bounds), BucketCounts: slices.Clone(s.counts), Sum: s.sum}
	if s.count > 0 {
		p.Min = metricdata.NewExtrema(s.minimum)
		p.Max = metricdata.NewExtrema(s.maximum)
	}
	return p
}

var _ sdkmetric.Producer = (*Histograms)(nil)
