package otel

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	gotel "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/instrumentation"
)

// clearOTelEnv blanks every OTEL_* variable of the environment for the test,
// so the machine's settings cannot leak in. Empty counts as unset for both
// autoexport and the SDK.
func clearOTelEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OTEL_") {
			t.Setenv(k, "")
		}
	}
}

func setupForTest(t *testing.T, cfg Config) *Providers {
	t.Helper()
	p, err := Setup(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Setup: %v", err)
	}
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	return p
}

// scrape GETs the metrics handler and parses the Prometheus text.
func scrape(t *testing.T, p *Providers) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	p.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: status %d: %s", rec.Code, rec.Body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

func labels(m *dto.Metric) map[string]string {
	out := make(map[string]string)
	for _, lp := range m.GetLabel() {
		out[lp.GetName()] = lp.GetValue()
	}
	return out
}

func TestSetup_exportersFromEnv(t *testing.T) {
	tests := []struct {
		name       string
		env        map[string]string
		wantTraces string // "", "console" or "otlp"
		wantReader bool
		wantErr    string
	}{
		{name: "nothing set exports nothing"},
		{name: "traces none", env: map[string]string{"OTEL_TRACES_EXPORTER": "none"}},
		{name: "traces console", env: map[string]string{"OTEL_TRACES_EXPORTER": "console"}, wantTraces: "console"},
		{name: "traces otlp http", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, wantTraces: "otlp"},
		{name: "traces otlp grpc", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, wantTraces: "otlp"},
		{name: "metrics prometheus adds no reader", env: map[string]string{"OTEL_METRICS_EXPORTER": "prometheus"}},
		{name: "metrics none", env: map[string]string{"OTEL_METRICS_EXPORTER": "none"}},
		{name: "metrics otlp", env: map[string]string{"OTEL_METRICS_EXPORTER": "otlp"}, wantReader: true},
		{name: "invalid traces exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, wantErr: `OTEL_TRACES_EXPORTER="zipkin"`},
		{name: "invalid metrics exporter", env: map[string]string{"OTEL_METRICS_EXPORTER": "statsd"}, wantErr: `OTEL_METRICS_EXPORTER="statsd"`},
		{name: "invalid protocol", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, wantErr: "invalid OTLP protocol"},
		{name: "invalid resource attributes", env: map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "novalue"}, wantErr: "OTEL_RESOURCE_ATTRIBUTES"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearOTelEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			p, err := Setup(context.Background(), Config{})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Setup error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Setup: %v", err)
			}
			t.Cleanup(func() { _ = p.Shutdown(context.Background()) })

			var gotTraces string
			switch p.spanExporter.(type) {
			case nil:
			case *stdouttrace.Exporter:
				gotTraces = "console"
			case *otlptrace.Exporter:
				gotTraces = "otlp"
			default:
				gotTraces = "unexpected"
			}
			if gotTraces != tt.wantTraces {
				t.Errorf("span exporter = %T, want %q", p.spanExporter, tt.wantTraces)
			}
			if got := p.extra != nil; got != tt.wantReader {
				t.Errorf("extra metric reader = %T, want present=%v", p.extra, tt.wantReader)
			}
		})
	}
}

func TestSetup_recordsSpansWithoutExporting(t *testing.T) {
	clearOTelEnv(t)
	p := setupForTest(t, Config{})
	_, span := p.TracerProvider.Tracer(ScopeName).Start(context.Background(), "op")
	defer span.End()
	sc := span.SpanContext()
	if !sc.IsValid() || !sc.IsSampled() || !span.IsRecording() {
		t.Errorf("span context %+v recording=%v: want valid, sampled, recording", sc, span.IsRecording())
	}
}

func TestSetup_metricsHandlerServesCounter(t *testing.T) {
	clearOTelEnv(t)
	p := setupForTest(t, Config{ServiceVersion: "1.2.3", Embedded: true})
	ctx := context.Background()

	c, err := p.MeterProvider.Meter(ScopeName).Int64Counter(MetricStageMessages, metric.WithUnit(UnitMessages))
	if err != nil {
		t.Fatal(err)
	}
	c.Add(ctx, 3, metric.WithAttributes(StageKey.String("enrich"), StreamKey.String("obs"), OutcomeKey.String(OutcomeAcked)))

	fams := scrape(t, p)
	fam := fams["dropstream_stage_messages_total"]
	if fam == nil || fam.GetType() != dto.MetricType_COUNTER || len(fam.GetMetric()) != 1 {
		t.Fatalf("dropstream_stage_messages_total = %v, want one counter series", fam)
	}
	m := fam.GetMetric()[0]
	if got := m.GetCounter().GetValue(); got != 3 {
		t.Errorf("counter value = %v, want 3", got)
	}
	want := map[string]string{"stage": "enrich", "stream": "obs", "outcome": "acked", "otel_scope_name": ScopeName}
	got := labels(m)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("label %s = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}

	for _, name := range []string{"go_goroutines", "go_gc_heap_live_bytes", "process_resident_memory_bytes", "process_cpu_seconds_total", "target_info"} {
		if fams[name] == nil {
			t.Errorf("%s missing from /metrics", name)
		}
	}
	if ti := fams["target_info"]; ti != nil {
		l := labels(ti.GetMetric()[0])
		if l["service_name"] != "dropstream" || l["service_version"] != "1.2.3" || l["dropstream_embedded"] != "true" {
			t.Errorf("target_info labels = %v", l)
		}
	}
}

func TestSetup_latencyHistogramBuckets(t *testing.T) {
	defaultBounds := []float64{0, 5, 10, 25, 50, 75, 100, 250, 500, 750, 1000, 2500, 5000, 7500, 10000}
	tests := []struct {
		name       string
		instrument string
		unit       string
		exposed    string
		want       []float64
		bound      bool // recorded into a series of the provider's Histograms
	}{
		{"duration in seconds", "x.duration", UnitSeconds, "x_duration_seconds", latencyBuckets, false},
		{"latency without unit", "x.latency", "", "x_latency", latencyBuckets, false},
		{"age in seconds", "x.age", UnitSeconds, "x_age_seconds", latencyBuckets, false},
		{"project histogram", MetricStageHandlerDuration, UnitSeconds, "dropstream_stage_handler_duration_seconds", latencyBuckets, false},
		{"bound histogram", MetricStageMessageAge, UnitSeconds, "dropstream_stage_message_age_seconds", latencyBuckets, true},
		{"milliseconds keep defaults", "x.duration", "ms", "x_duration_milliseconds", defaultBounds, false},
		{"other name keeps defaults", "x.size", "By", "x_size_bytes", defaultBounds, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearOTelEnv(t)
			p := setupForTest(t, Config{})
			if tt.bound {
				p.MeterProvider.(*MeterProvider).Histograms.Series(instrumentation.Scope{Name: ScopeName}, tt.instrument, "",
					tt.unit, LatencyBuckets(), attribute.NewSet()).Record(0.0003)
			} else {
				h, err := p.MeterProvider.Meter(ScopeName).Float64Histogram(tt.instrument, metric.WithUnit(tt.unit))
				if err != nil {
					t.Fatal(err)
				}
				h.Record(context.Background(), 0.0003)
			}

			fam := scrape(t, p)[tt.exposed]
			if fam == nil || fam.GetType() != dto.MetricType_HISTOGRAM {
				t.Fatalf("%s: not exposed as a histogram", tt.exposed)
			}
			hist := fam.GetMetric()[0].GetHistogram()
			var got []float64
			for _, b := range hist.GetBucket() {
				if !math.IsInf(b.GetUpperBound(), 1) {
					got = append(got, b.GetUpperBound())
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("buckets = %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("buckets = %v, want %v", got, tt.want)
				}
			}
			if hist.GetSampleCount() != 1 {
				t.Errorf("count = %d, want 1", hist.GetSampleCount())
			}
		})
	}
}

func TestSetup_resourceFromEnv(t *testing.T) {
	clearOTelEnv(t)
	t.Setenv("OTEL_SERVICE_NAME", "ingest")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=test")
	p := setupForTest(t, Config{ServiceName: "ignored"})
	ti := scrape(t, p)["target_info"]
	if ti == nil {
		t.Fatal("target_info missing")
	}
	l := labels(ti.GetMetric()[0])
	if l["service_name"] != "ingest" || l["deployment_environment_name"] != "test" {
		t.Errorf("target_info labels = %v, want service_name=ingest, deployment_environment_name=test", l)
	}
}

func TestProviders_Shutdown_idempotent(t *testing.T) {
	clearOTelEnv(t)
	p, err := Setup(context.Background(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := p.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown #%d: %v", i+1, err)
		}
	}
	// The handler keeps serving the runtime collectors after Shutdown.
	if fams := scrape(t, p); fams["go_goroutines"] == nil {
		t.Error("go_goroutines missing after Shutdown")
	}
}

func TestConfig_Validate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr bool
	}{
		{"zero value", Config{}, false},
		{"full", Config{ServiceName: "dropstream-api", ServiceVersion: "v1.0.0", Embedded: true}, false},
		{"padded name", Config{ServiceName: " api"}, true},
		{"control char in version", Config{ServiceVersion: "1\n2"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.cfg.Validate(); (err != nil) != tt.wantErr {
				t.Errorf("Validate() = %v, wantErr %v", err, tt.wantErr)
			}
		})
	}
}

func TestSetup_invalidConfig(t *testing.T) {
	clearOTelEnv(t)
	if _, err := Setup(context.Background(), Config{ServiceName: "a\tb"}); err == nil {
		t.Fatal("Setup with invalid config: want error")
	}
}

func TestProviders_SetGlobal(t *testing.T) {
	clearOTelEnv(t)
	prevTP, prevMP, prevProp := gotel.GetTracerProvider(), gotel.GetMeterProvider(), gotel.GetTextMapPropagator()
	t.Cleanup(func() {
		gotel.SetTracerProvider(prevTP)
		gotel.SetMeterProvider(prevMP)
		gotel.SetTextMapPropagator(prevProp)
	})
	p := setupForTest(t, Config{})
	p.SetGlobal()

	if gotel.GetTracerProvider() != p.TracerProvider || gotel.GetMeterProvider() != p.MeterProvider {
		t.Error("global providers not installed")
	}
	ctx, span := gotel.Tracer(ScopeName).Start(context.Background(), "op")
	defer span.End()
	fields := map[string]string{}
	gotel.GetTextMapPropagator().Inject(ctx, propagation.MapCarrier(fields))
	if got, want := fields["traceparent"], "00-"+span.SpanContext().TraceID().String()+"-"+span.SpanContext().SpanID().String()+"-01"; got != want {
		t.Errorf("traceparent = %q, want %q", got, want)
	}
	// Fields comes out of a map in the composite propagator: any order.
	got := gotel.GetTextMapPropagator().Fields()
	slices.Sort(got)
	if want := []string{"baggage", "traceparent", "tracestate"}; !reflect.DeepEqual(got, want) {
		t.Errorf("propagator fields = %v, want %v", got, want)
	}
}
