package otel

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/trace"
	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpSink is an OTLP/HTTP receiver recording trace ids and metric names.
type otlpSink struct {
	mu       sync.Mutex
	traceIDs map[string]bool
	metrics  map[string]bool
}

func (s *otlpSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch r.URL.Path {
	case "/v1/traces":
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				for _, sp := range ss.GetSpans() {
					s.traceIDs[trace.TraceID(sp.GetTraceId()).String()] = true
				}
			}
		}
	case "/v1/metrics":
		var req colmetricpb.ExportMetricsServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rm := range req.GetResourceMetrics() {
			for _, sm := range rm.GetScopeMetrics() {
				for _, m := range sm.GetMetrics() {
					s.metrics[m.GetName()] = true
				}
			}
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
}

func TestSetup_otlpHTTPExportsOnShutdown(t *testing.T) {
	sink := &otlpSink{traceIDs: map[string]bool{}, metrics: map[string]bool{}}
	srv := httptest.NewServer(sink)
	defer srv.Close()

	clearOTelEnv(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_METRICS_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)

	ctx := context.Background()
	p, err := Setup(ctx, Config{})
	if err != nil {
		t.Fatal(err)
	}
	_, span := p.TracerProvider.Tracer(ScopeName).Start(ctx, "publish obs")
	span.End()
	c, err := p.MeterProvider.Meter(ScopeName).Int64Counter(MetricStreamPublished)
	if err != nil {
		t.Fatal(err)
	}
	c.Add(ctx, 1)
	p.MeterProvider.(*MeterProvider).Histograms.Series(instrumentation.Scope{Name: ScopeName},
		MetricStageHandlerDuration, "d", UnitSeconds, LatencyBuckets(), attribute.NewSet(StageKey.String("s"))).Record(0.01)

	// Shutdown flushes the batch span processor and the periodic reader.
	if err := p.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if id := span.SpanContext().TraceID().String(); !sink.traceIDs[id] {
		t.Errorf("trace %s not received; got %v", id, sink.traceIDs)
	}
	for _, name := range []string{MetricStreamPublished, MetricStageHandlerDuration} {
		if !sink.metrics[name] {
			t.Errorf("metric %s not received; got %v", name, sink.metrics)
		}
	}
}
