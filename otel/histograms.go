package otel

import (
	"context"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Histograms holds explicit-bucket histograms whose series are bound to
// one attribute set when they are created, so that a measurement is a
// bucket search and a few atomic adds: no attribute resolution, map lookup
// or lock, which is most of what the metric SDK spends per measurement.
// The runtime records a message's handler time and age this way for every
// message. The SDK's readers read Histograms as a [sdkmetric.Producer]:
// its data joins the same export, under the same names, units and scopes,
// as cumulative histograms from the time the set was created.
//
// Its methods are safe for concurrent use.
type Histograms struct {
	start  time.Time
	mu     sync.Mutex
	scopes []*histogramScope
}

// NewHistograms returns an empty set.
func NewHistograms() *Histograms { return &Histograms{start: time.Now()} }

type histogramScope struct {
	scope      instrumentation.Scope
	histograms []*Histogram
}

// Histogram is one named histogram of a [Histograms] set.
type Histogram struct {
	name, description, unit string
	bounds                  []float64
	mu                      sync.Mutex
	series                  map[attribute.Distinct]*Series
	order                   []*Series
}

// Series is a histogram's series for one attribute set. Record is safe
// for concurrent use and does not allocate.
type Series struct {
	attrs   attribute.Set
	bounds  []float64
	buckets []atomic.Uint64 // len(bounds)+1
	sum     atomic.Uint64   // float64 bits
	min     atomic.Uint64   // float64 bits
	max     atomic.Uint64   // float64 bits
}

// Histogram returns the histogram of that name in that instrumentation
// scope, creating it with the given description, unit and bucket bounds
// (ascending) on first use; later calls return the first one whatever
// they pass.
func (h *Histograms) Histogram(scope instrumentation.Scope, name, description, unit string, bounds []float64) *Histogram {
	h.mu.Lock()
	defer h.mu.Unlock()
	var s *histogramScope
	for _, sc := range h.scopes {
		if sc.scope == scope {
			s = sc
			break
		}
	}
	if s == nil {
		s = &histogramScope{scope: scope}
		h.scopes = append(h.scopes, s)
	}
	for _, hist := range s.histograms {
		if hist.name == name {
			return hist
		}
	}
	hist := &Histogram{name: name, description: description, unit: unit, bounds: slices.Clone(bounds),
		series: map[attribute.Distinct]*Series{}}
	s.histograms = append(s.histograms, hist)
	return hist
}

// Series returns the histogram's series for attrs, creating it on first
// use. Callers keep it and record into it.
func (hist *Histogram) Series(attrs attribute.Set) *Series {
	hist.mu.Lock()
	defer hist.mu.Unlock()
	if s, ok := hist.series[attrs.Equivalent()]; ok {
		return s
	}
	s := &Series{attrs: attrs, bounds: hist.bounds, buckets: make([]atomic.Uint64, len(hist.bounds)+1)}
	s.min.Store(math.Float64bits(math.Inf(1)))
	s.max.Store(math.Float64bits(math.Inf(-1)))
	hist.series[attrs.Equivalent()] = s
	hist.order = append(hist.order, s)
	return s
}

// Record adds one measurement. NaN is ignored.
func (s *Series) Record(v float64) {
	if math.IsNaN(v) {
		return
	}
	// A bucket holds values up to and including its upper bound, as the
	// SDK's explicit-bucket histograms do.
	s.buckets[sort.SearchFloat64s(s.bounds, v)].Add(1)
	addFloat(&s.sum, v)
	for {
		old := s.min.Load()
		if v >= math.Float64frombits(old) || s.min.CompareAndSwap(old, math.Float64bits(v)) {
			break
		}
	}
	for {
		old := s.max.Load()
		if v <= math.Float64frombits(old) || s.max.CompareAndSwap(old, math.Float64bits(v)) {
			break
		}
	}
}

func addFloat(u *atomic.Uint64, v float64) {
	for {
		old := u.Load()
		if u.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// Produce returns every histogram with at least one series, as
// cumulative data points at the current time. A series' count is the sum
// of its buckets read at that moment, so the two always agree.
func (h *Histograms) Produce(context.Context) ([]metricdata.ScopeMetrics, error) {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []metricdata.ScopeMetrics
	for _, sc := range h.scopes {
		sm := metricdata.ScopeMetrics{Scope: sc.scope}
		for _, hist := range sc.histograms {
			hist.mu.Lock()
			points := make([]metricdata.HistogramDataPoint[float64], 0, len(hist.order))
			for _, s := range hist.order {
				points = append(points, s.point(h.start, now))
			}
			hist.mu.Unlock()
			if len(points) == 0 {
				continue
			}
			sm.Metrics = append(sm.Metrics, metricdata.Metrics{Name: hist.name, Description: hist.description, Unit: hist.unit,
				Data: metricdata.Histogram[float64]{Temporality: metricdata.CumulativeTemporality, DataPoints: points}})
		}
		if len(sm.Metrics) > 0 {
			out = append(out, sm)
		}
	}
	return out, nil
}

func (s *Series) point(start, now time.Time) metricdata.HistogramDataPoint[float64] {
	counts := make([]uint64, len(s.buckets))
	var count uint64
	for i := range s.buckets {
		counts[i] = s.buckets[i].Load()
		count += counts[i]
	}
	p := metricdata.HistogramDataPoint[float64]{Attributes: s.attrs, StartTime: start, Time: now, Count: count,
		Bounds: slices.Clone(s.bounds), BucketCounts: counts, Sum: math.Float64frombits(s.sum.Load())}
	if count > 0 {
		p.Min = metricdata.NewExtrema(math.Float64frombits(s.min.Load()))
		p.Max = metricdata.NewExtrema(math.Float64frombits(s.max.Load()))
	}
	return p
}

var _ sdkmetric.Producer = (*Histograms)(nil)
