package otel

import (
	"context"
	"sync/atomic"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// stalledExporter counts the spans it is given, once release is closed.
type stalledExporter struct {
	release chan struct{}
	spans   atomic.Int64
}

func (e *stalledExporter) ExportSpans(ctx context.Context, s []sdktrace.ReadOnlySpan) error {
	select {
	case <-e.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	e.spans.Add(int64(len(s)))
	return nil
}
func (*stalledExporter) Shutdown(context.Context) error { return nil }

// TestNewSpanProcessor_keepsABurstWhileTheExporterIsBusy ends five times
// the SDK's default queue of spans while the exporter is held: every one
// is exported once it is released, where the SDK's default drops them.
func TestNewSpanProcessor_keepsABurstWhileTheExporterIsBusy(t *testing.T) {
	clearOTelEnv(t)
	exp := &stalledExporter{release: make(chan struct{})}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(NewSpanProcessor(exp)))
	const spans = 5 * 2048
	for range spans {
		_, span := tp.Tracer("t").Start(context.Background(), "s")
		span.End()
	}
	close(exp.release)
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := exp.spans.Load(); got != spans {
		t.Errorf("%d spans exported, want %d", got, spans)
	}
}

// TestNewSpanProcessor_endDoesNotWaitForAStalledExporter: with a queue of
// one and the exporter held, ending spans returns (they are dropped): a
// collector that is down does not stop the stages.
func TestNewSpanProcessor_endDoesNotWaitForAStalledExporter(t *testing.T) {
	clearOTelEnv(t)
	t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "1")
	exp := &stalledExporter{release: make(chan struct{})}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(NewSpanProcessor(exp)))
	for range 100 {
		_, span := tp.Tracer("t").Start(context.Background(), "s")
		span.End()
	}
	close(exp.release)
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := exp.spans.Load(); got >= 100 {
		t.Errorf("%d of 100 spans exported through a queue of one while the exporter was held: End waited", got)
	}
}
